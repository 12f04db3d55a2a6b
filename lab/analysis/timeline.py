"""Who ran when: one row per node (its launcher) and per rank, from launch to exit, drawn as the record's timeline.png.

What goes in, all read back from the run record (record.py):
- each step's launch and each node's exit (wall clock, `StepRecord.started_at`/`node_exits`, kept by launch.py);
- each rank's own moments, where the program reports them: `results/<step>/events-rank<r>.jsonl`, which
  exercises/labkit.py writes (process started, process group ready, first and last step, finished);
- how each rank ended: torchrun's failure report in the node's log (rank and exit code), or, for a run the lab
  stopped, the rank's stack (`stacks/`: it was still waiting, and where);
- the lab's own moments: the fault it injected (`fault_at`), the timeout or early stop (`stopped_at`).

A hung or failed run's chart thus shows who waited (a hatched bar to the stop, labelled with where it waited)
and who was gone (a red bar that ends early, labelled with its exit code or signal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from lab.analysis.diagnosis import Evidence, NodeEvidence, failure_report_ranks, read_lines
from lab.analysis.diagnosis.logs import exit_text
from lab.analysis.stacks import load_stacks

if TYPE_CHECKING:
    from lab.analysis.record import RunRecord, StepRecord

TIMELINE_FILE = "timeline.png"
EVENTS_GLOB = "events-rank*.jsonl"

# How a span ended: its own success, its own failure, or the lab's doing (stopped at a timeout/early stop, or a fault).
OK, FAILED, KILLED = "ok", "failed", "killed"


@dataclass
class Span:
    """One process's life (a node's launcher, or one rank's process) within one step."""

    start: float
    end: float
    outcome: str  # OK, FAILED or KILLED
    label: str = ""  # how it ended, when not OK: "exit 1", "SIGKILL", "stopped by the lab: waiting in all_reduce"


@dataclass
class Row:
    label: str  # "node1", "rank 3"
    node: int
    rank: int | None  # None: the node's row
    spans: list[Span] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)  # (when, "pg_ready" | "first_step" | "last_step")


@dataclass
class Timeline:
    rows: list[Row]
    moments: list[tuple[float, str, str]]  # (when, "fault" | "timeout" | "stop", label): the vertical lines
    steps: list[tuple[str, float, float]]  # (name, start, end) of every step that launched

    @property
    def start(self) -> float:
        return min((start for _, start, _ in self.steps), default=0.0)


def build_timeline(record: RunRecord) -> Timeline:
    """The timeline of every step that launched; steps from records without times are left out."""
    rows: dict[tuple[int, int | None], Row] = {}
    moments: list[tuple[float, str, str]] = []
    steps: list[tuple[str, float, float]] = []
    timed = [step for step in record.steps if step.started_at is not None]
    for step in timed:
        end = _step_end(step)
        steps.append((step.name, step.started_at, end))
        _add_nodes(rows, step, end)
        _add_ranks(rows, record, step, end)
        if step.fault_at is not None:
            fault = step.fault or {}
            moments.append((step.fault_at, "fault",
                            f"fault: {fault.get('action', 'kill-worker')} node{fault.get('node', 1)}"))
        moments += [(when, "fault", f"lab fault: node{node} {action}") for when, node, action in step.hand_faults]
        if step.stopped_at is not None:
            kind = "timeout" if step.timed_out else "stop"
            moments.append((step.stopped_at, kind, "timeout" if step.timed_out else "early stop"))
    ordered = sorted(rows.values(), key=lambda row: (row.node, row.rank is not None, row.rank or 0))
    return Timeline(ordered, sorted(moments), steps)


def _step_end(step: StepRecord) -> float:
    ends = list(step.node_exits.values()) + ([step.stopped_at] if step.stopped_at else [])
    return max(ends, default=step.started_at + step.seconds)


def _row(rows: dict, node: int, rank: int | None) -> Row:
    key = (node, rank)
    if key not in rows:
        rows[key] = Row(f"node{node}" if rank is None else f"rank {rank}", node, rank)
    return rows[key]


def _add_nodes(rows: dict, step: StepRecord, end: float) -> None:
    """One span per node: the command the lab started there (torchrun's agent, mp.spawn's parent, the user's)."""
    fault = step.fault or {}
    fault_node = int(fault.get("node", 1)) if step.fault_injected and fault.get("action") == "kill-node" else None
    for node in sorted(set(step.exit_codes) | set(step.node_exits)):
        code = step.exit_codes.get(node)
        if node == fault_node:
            outcome, label = KILLED, "killed by the fault"
        elif code == 0:
            outcome, label = OK, ""
        else:
            outcome, label = (KILLED if code is None else FAILED), exit_text(code)
        _row(rows, node, None).spans.append(Span(step.started_at, step.node_exits.get(node, end), outcome, label))


def _add_ranks(rows: dict, record: RunRecord, step: StepRecord, end: float) -> None:
    """One span per process of each rank: from its own events where it wrote them, else from what the lab saw."""
    processes = _read_events(record.path / "results" / step.name)
    reported = _reported_exits(record, step)
    stacks_dir = record.stacks_dir / step.name  # the runner's folder for a step of several; else stacks/ itself
    stacks_dir = stacks_dir if stacks_dir.is_dir() else record.stacks_dir
    waiting = {(stack.node, stack.rank): stack for stack in load_stacks(stacks_dir)
               if stack.role == "worker" and stack.rank is not None}
    by_rank: dict[tuple[int, int], list[list[dict]]] = {}
    for events in processes:
        by_rank.setdefault((int(events[0].get("node_rank", 0)), int(events[0]["rank"])), []).append(events)
    for node, found in reported.items():
        for rank, _ in found:
            by_rank.setdefault((node, rank), [])
    for node, rank in waiting:
        by_rank.setdefault((node, rank), [])
    for (node, rank), lives in sorted(by_rank.items()):
        row = _row(rows, node, rank)
        node_end = step.node_exits.get(node, end)
        lives.sort(key=lambda events: events[0]["time"])
        for index, events in enumerate(lives):
            times = {event["event"]: event["time"] for event in events}
            step_times = [event["time"] for event in events if event["event"] == "step"]
            for name, when in (("pg_ready", times.get("pg_ready")),
                               ("first_step", min(step_times, default=None)),
                               ("last_step", max(step_times, default=None) if len(step_times) > 1 else None)):
                if when is not None:
                    row.marks.append((when, name))
            start = times.get("started", events[0]["time"])
            if "finished" in times:
                row.spans.append(Span(start, times["finished"], OK))
            elif index + 1 < len(lives):  # a later process of the same rank: torchrun restarted it
                row.spans.append(Span(start, _replaced_end(events, lives[index + 1][0]["time"], step.fault_at),
                                      FAILED, "restarted"))
            else:
                row.spans.append(_last_life(start, node_end, step, node, rank, reported, waiting))
        if not lives:
            row.spans.append(_last_life(step.started_at, node_end, step, node, rank, reported, waiting))


def _replaced_end(events: list[dict], restarted: float, fault_at: float | None) -> float:
    """When a process torchrun replaced ended: at the fault, when one hit during its life, else at its last word."""
    if fault_at is not None and events[0]["time"] <= fault_at <= restarted:
        return fault_at
    return max(event["time"] for event in events)


def _last_life(start: float, end: float, step: StepRecord, node: int, rank: int, reported: dict,
               waiting: dict) -> Span:
    """How a rank's (last) process ended when it did not say so itself: the failure report, its stack, the node."""
    code = dict(reported.get(node, [])).get(rank)
    if code is not None:
        return Span(start, end, FAILED, exit_text(code))
    if (node, rank) in waiting:
        where = waiting[(node, rank)].waiting()
        place = (where.call or (where.user_frame and where.user_frame.location)) if where else None
        return Span(start, step.stopped_at or end, KILLED, f"waiting in {place}" if place else "stopped by the lab")
    node_code = step.exit_codes.get(node)
    if node_code == 0:
        return Span(start, end, OK)
    return Span(start, end, KILLED if node_code is None else FAILED, exit_text(node_code))


def _read_events(folder: Path) -> list[list[dict]]:
    """Every process's events (one list per rank and pid, in order) from the events files labkit writes."""
    processes: dict[tuple[int, int], list[dict]] = {}
    for path in sorted(folder.glob(EVENTS_GLOB)) if folder.is_dir() else []:
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
                key = (int(event["rank"]), int(event.get("pid", 0)))
                float(event["time"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a kill
            processes.setdefault(key, []).append(event)
    return list(processes.values())


def _reported_exits(record: RunRecord, step: StepRecord) -> dict[int, list[tuple[int, int]]]:
    """node -> [(rank, exit code)] from torchrun's failure reports in the step's logs."""
    nodes = []
    for node in sorted(step.exit_codes):
        log = record.path / "logs" / f"node{node}-{step.name}.log"
        lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
        nodes.append(NodeEvidence(node, f"node{node}", step.exit_codes[node], lines=lines))
    evidence = Evidence(nodes, nnodes=len(nodes), nproc_per_node=step.nproc_per_node or 1)
    return failure_report_ranks(read_lines(evidence))


# ---------------------------------------------------------------------------------------------
# Drawing.

COLOURS = {OK: "#59a14f", FAILED: "#d62728", KILLED: "#f4b6b6"}
MARKS = {"pg_ready": ("D", "#1f5fa8", "process group ready"), "first_step": (">", "#111111", "first step"),
         "last_step": ("<", "#7b3294", "last step")}
MOMENT_STYLE = {"fault": ("#d62728", "--"), "timeout": ("#222222", "-."), "stop": ("#e07b00", "-.")}


def timeline_path(record: RunRecord) -> Path:
    return record.path / TIMELINE_FILE


def draw_timeline(record: RunRecord, target: Path | None = None) -> Path | None:
    """timeline.png (or `target`) for `record`; None when no step has launch times (e.g. stopped before launching)."""
    timeline = build_timeline(record)
    if not timeline.rows:
        return None
    from matplotlib.figure import Figure  # no pyplot: its global figure list is not safe in threads (lab run --jobs)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    t0 = timeline.start
    rows = timeline.rows
    top, bottom, legend = 0.45, 0.55, 0.35  # inches: title; axis label; legend below it
    height = top + bottom + legend + 0.5 + 0.42 * len(rows)
    figure = Figure(figsize=(11, height))
    axes = figure.subplots()
    figure.subplots_adjust(left=0.1, right=0.98, top=1 - top / height, bottom=(bottom + legend) / height)
    for y, row in enumerate(rows):
        height = 0.62 if row.rank is None else 0.42
        for span in row.spans:
            width = max(span.end - span.start, 0.05)
            axes.barh(y, width, left=span.start - t0, height=height, color=COLOURS[span.outcome],
                      edgecolor=COLOURS[FAILED] if span.outcome != OK else "#2f6b2a", linewidth=0.8,
                      hatch="///" if span.outcome == KILLED else None)
            if span.label:
                axes.text(span.end - t0, y, f" {span.label}", va="center", ha="left", fontsize=7.5,
                          color="#8b0000" if span.outcome == FAILED else "#444444")
        for when, kind in row.marks:
            marker, colour, _ = MARKS[kind]
            axes.plot(when - t0, y, marker=marker, color=colour, markersize=6, linestyle="none", zorder=3)
    for index, (name, start, end) in enumerate(timeline.steps):
        if len(timeline.steps) > 1:
            axes.axvspan(start - t0, end - t0, color="#eeeeee" if index % 2 else "#f7f7f7", zorder=0)
            axes.text(start - t0, len(rows) - 0.05, f" step {name}", ha="left", va="center", fontsize=8,
                      color="#555555")
    for index, (when, kind, label) in enumerate(timeline.moments):
        colour, style = MOMENT_STYLE[kind]
        axes.axvline(when - t0, color=colour, linestyle=style, linewidth=1.3, zorder=4)
        # Labels alternate between two heights, so those of moments close in time do not overprint each other.
        axes.text(when - t0, -0.7 - 0.45 * (index % 2), f" {label}", color=colour, fontsize=8, va="center")
    axes.set_yticks(range(len(rows)))
    axes.set_yticklabels([row.label if row.rank is None else f"  {row.label}" for row in rows])
    for tick, row in zip(axes.get_yticklabels(), rows):
        tick.set_fontweight("bold" if row.rank is None else "normal")
    axes.set_ylim(len(rows) - 0.2 + 0.6, -1.45 if len(timeline.moments) > 1 else -1.0)
    right = max([span.end for row in rows for span in row.spans] + [when for when, _, _ in timeline.moments]) - t0
    axes.set_xlim(-0.02 * right, right * 1.3 + 0.5)  # room for the end labels
    axes.set_xlabel(f"seconds since launch ({datetime.fromtimestamp(t0).strftime('%Y-%m-%d %H:%M:%S')})")
    axes.grid(axis="x", alpha=0.3)
    axes.set_title(f"{record.run_id}: {record.exercise} on '{record.lab}', {record.status}", fontsize=10)
    outcomes = {span.outcome for row in rows for span in row.spans}
    marks = {kind for row in rows for _, kind in row.marks}
    legend = [Patch(facecolor=COLOURS[outcome], edgecolor=COLOURS[FAILED] if outcome != OK else "#2f6b2a",
                    hatch="///" if outcome == KILLED else None, label=label)
              for outcome, label in ((OK, "ran, ended well"), (FAILED, "failed (exit code or signal)"),
                                     (KILLED, "stopped by the lab or a fault")) if outcome in outcomes]
    legend += [Line2D([], [], marker=marker, color=colour, linestyle="none", label=label)
               for kind, (marker, colour, label) in MARKS.items() if kind in marks]
    legend += [Line2D([], [], color=MOMENT_STYLE[kind][0], linestyle=MOMENT_STYLE[kind][1], label=label)
               for kind, label in (("fault", "fault injected"), ("timeout", "timeout"), ("stop", "early stop"))
               if any(moment[1] == kind for moment in timeline.moments)]
    figure.legend(handles=legend, loc="lower center", ncol=5, fontsize=7.5, frameon=False)
    target = target or timeline_path(record)
    figure.savefig(target, dpi=110)
    return target
