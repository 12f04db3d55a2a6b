"""Run records: the one type every run (exercise, exec, torchrun) keeps, and how it is saved and read back.

A record is a folder `.lab/runs/<id>/` with `run.json` (this module's `RunRecord.to_dict`), the nodes'
logs (`logs/node<i>-<step>.log`), every rank's results (`results/<step>/`), training curves (`loss.png`),
who ran when (`timeline.png`, lab/analysis/timeline.py, drawn when a command shows the run) and, from runs that hung,
the ranks' stacks (`stacks/`).
`.lab/runs/latest` links to the newest. Records are held to a bound (count, total size, age) after every run, and
`lab runs --keep RUN` pins one: lab/analysis/retention.py.
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from lab import paths
from lab.analysis import retention
from lab.errors import LabError, LabStateError, SpecError
from lab.jobs.checks import Check

# 1: records written before the version was kept (no `schema_version` key); read the same way.
# 2: the version is kept, steps carry `command` and `expect` (None where they have none), `diagnosis` added.
# 3: steps carry wall-clock times for the timeline (`started_at`, `node_exits`, `stopped_at`, `fault_at`),
#    `nproc_per_node` and `master_port`; None/{} in older records.
# 4: steps of a launch that did not end well carry `probes`: what every node answered when the lab asked it after the
#    run (lab/jobs/probes.py; read with lab.analysis.diagnosis.NodeProbes.from_dict); None in older records.
SCHEMA_VERSION = 4
UNREADABLE = "unreadable"


@dataclass
class StepRecord:
    """One launch across the nodes: how every node ended, and what went wrong."""

    name: str
    command: list[str] | None = None  # exec/torchrun: what the user ran
    expect: str | None = None  # exercise steps: "pass" or "fail"; exec/torchrun have no expectation
    exit_codes: dict[int, int | None] = field(default_factory=dict)  # node -> exit status (None: killed by the lab at a timeout or early stop, or never ended)
    timed_out: bool = False
    seconds: float = 0.0
    ranks_reported: list[int] = field(default_factory=list)
    oom_killed: list[int] = field(default_factory=list)  # nodes where the kernel killed a process
    fault: dict | None = None  # the fault the manifest injects in this step
    fault_injected: bool = False
    problem: str | None = None  # e.g. the timeout message naming the ranks that never reported
    nproc_per_node: int | None = None
    master_port: int | None = None
    # Wall-clock times (time.time()) for the timeline (lab/analysis/timeline.py): the launch, each node's exit,
    # the lab's stop (timeout or early stop) and the injected fault.
    started_at: float | None = None
    node_exits: dict[int, float] = field(default_factory=dict)
    stopped_at: float | None = None
    fault_at: float | None = None
    hand_faults: list[tuple[float, int, str]] = field(default_factory=list)  # `lab fault` while it ran: (when, node, action)
    probes: dict | None = None  # what the nodes answered after a launch that did not end well (NodeProbes.to_dict)

    def to_dict(self) -> dict:
        return {"step": self.name, "command": self.command, "expect": self.expect, "exit_codes": self.exit_codes,
                "timed_out": self.timed_out, "seconds": round(self.seconds, 2), "ranks_reported": self.ranks_reported,
                "oom_killed": self.oom_killed, "fault": self.fault, "fault_injected": self.fault_injected,
                "problem": self.problem, "nproc_per_node": self.nproc_per_node, "master_port": self.master_port,
                "started_at": self.started_at, "node_exits": self.node_exits, "stopped_at": self.stopped_at,
                "fault_at": self.fault_at,
                "hand_faults": [{"at": at, "node": node, "action": action} for at, node, action in self.hand_faults],
                "probes": self.probes}

    @classmethod
    def from_dict(cls, data: dict) -> StepRecord:
        """The step as saved (JSON made its node numbers strings); missing keys take their defaults."""
        return cls(name=str(data["step"]), command=data.get("command"), expect=data.get("expect"),
                   exit_codes={int(node): code for node, code in (data.get("exit_codes") or {}).items()},
                   timed_out=bool(data.get("timed_out")), seconds=float(data.get("seconds") or 0),
                   ranks_reported=[int(rank) for rank in data.get("ranks_reported") or []],
                   oom_killed=[int(node) for node in data.get("oom_killed") or []], fault=data.get("fault") or None,
                   fault_injected=bool(data.get("fault_injected")), problem=data.get("problem"),
                   nproc_per_node=data.get("nproc_per_node"), master_port=data.get("master_port"),
                   started_at=data.get("started_at"),
                   node_exits={int(node): float(when) for node, when in (data.get("node_exits") or {}).items()},
                   stopped_at=data.get("stopped_at"), fault_at=data.get("fault_at"),
                   hand_faults=[(float(fault["at"]), int(fault["node"]), str(fault["action"]))
                                for fault in data.get("hand_faults") or []],
                   probes=data.get("probes") or None)


@dataclass
class RunRecord:
    run_id: str
    exercise: str  # the exercise's name, or 'exec' / 'torchrun'
    lab: str  # the target's label: a lab's name, 'local', or 'inventory-<file>'
    path: Path
    status: str = "running"  # running, passed, failed, interrupted, error (or unreadable, for a broken run.json)
    seconds: float = 0.0
    steps: list[StepRecord] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    curves: Path | None = None
    error: str = ""
    diagnosis: list[dict] = field(default_factory=list)  # findings about a failed run (lab/analysis/diagnosis/)
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def new(cls, label: str, lab: str) -> RunRecord:
        """A fresh record under the runs folder; its id sorts by start time and ends with `label`.

        The record's folder is made here, exclusively: two runs started in the same millisecond get different ids
        (the id also names the run's shared folder and the LAB_RUN_ID its processes are found and killed by).
        """
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")[:-3]
        runs = paths.runs_dir()
        runs.mkdir(parents=True, exist_ok=True)
        for attempt in itertools.count(1):
            run_id = f"{stamp}-{label}" if attempt == 1 else f"{stamp}-{attempt}-{label}"
            try:
                (runs / run_id).mkdir()
            except FileExistsError:
                continue
            return cls(run_id, label, lab, runs / run_id)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def stacks_dir(self) -> Path:
        """Where the ranks' stacks of a hung run go (lab/analysis/stacks.py)."""
        return self.path / "stacks"

    def to_dict(self) -> dict:
        return {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "exercise": self.exercise,
            "lab": self.lab,
            "status": self.status,
            "passed": self.passed,
            "seconds": round(self.seconds, 2),
            "steps": [step.to_dict() for step in self.steps],
            "checks": [{"name": check.name, "passed": check.passed, "detail": check.detail} for check in self.checks],
            "path": str(self.path),
            "curves": str(self.curves) if self.curves else None,
            "error": self.error or None,
            "diagnosis": self.diagnosis,
        }

    @classmethod
    def from_dict(cls, data: dict) -> RunRecord:
        """A record as `to_dict` saved it, also from before the schema version existed (version 1)."""
        return cls(
            run_id=str(data["run_id"]), exercise=str(data.get("exercise") or ""), lab=str(data.get("lab") or ""),
            path=Path(data.get("path") or paths.runs_dir() / str(data["run_id"])),
            status=str(data.get("status") or "unknown"), seconds=float(data.get("seconds") or 0),
            steps=[StepRecord.from_dict(step) for step in data.get("steps") or []],
            checks=[Check(str(check["name"]), bool(check["passed"]), check.get("detail") or "")
                    for check in data.get("checks") or []],
            curves=Path(data["curves"]) if data.get("curves") else None, error=data.get("error") or "",
            diagnosis=list(data.get("diagnosis") or []), schema_version=int(data.get("schema_version", 1)))

    def save(self) -> None:
        """Write run.json and point `latest` at this record."""
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "run.json").write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        latest = paths.runs_dir() / "latest"
        try:
            if latest.is_symlink() or latest.exists():
                latest.unlink()
            latest.symlink_to(self.path.name)
        except OSError:
            pass

    def save_logs(self, step_name: str, logs: dict[int, str]) -> None:
        logs_dir = self.path / "logs"
        logs_dir.mkdir(parents=True, exist_ok=True)
        for index, text in logs.items():
            (logs_dir / f"node{index}-{step_name}.log").write_text(text + "\n")

    def save_results(self, step_name: str, source: Path) -> None:
        """Copy a step's results folder (every rank's JSON, metrics) into the record."""
        if source.is_dir():
            shutil.copytree(source, self.path / "results" / step_name, dirs_exist_ok=True)

    def draw_curves(self) -> None:
        """loss.png from the ranks' training metrics, when the run logged any."""
        self.curves = _loss_plot(self.path)


@contextmanager
def recording(record: RunRecord):
    """Save `record` however its block ends: finished, interrupted, or stopped by a LabError; then hold the records
    to their bound (lab/analysis/retention.py), which never removes this run nor another one still in progress."""
    try:
        bound = retention.configured_bound()  # a bad LAB_RUNS_MAX_* is one line before anything runs
    except LabError:
        shutil.rmtree(record.path, ignore_errors=True)
        raise
    started = time.monotonic()
    record.path.mkdir(parents=True, exist_ok=True)
    in_progress = retention.hold_recording(record.path)
    try:
        yield record
    except KeyboardInterrupt:
        record.status = "interrupted"
        raise
    except LabError as error:
        record.status, record.error = "error", error.message
        raise
    finally:  # the timeline is drawn when someone looks (`lab show`, `lab explain`, `lab report`), not here
        record.seconds = time.monotonic() - started
        record.save()
        try:
            retention.prune(bound, protect=frozenset({record.run_id}))
        finally:
            if in_progress:
                in_progress.release()
                in_progress.path.unlink(missing_ok=True)


def _read(folder: Path) -> RunRecord:
    """The record in `folder`; a run.json that cannot be read is an `unreadable` record of that folder."""
    try:
        record = RunRecord.from_dict(json.loads((folder / "run.json").read_text()))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return RunRecord(folder.name, "", "", folder, status=UNREADABLE)
    record.path = folder  # where it is now, also when the state folder was moved
    return record


def list_runs() -> list[RunRecord]:
    """Every recorded run, oldest first."""
    runs_dir = paths.runs_dir()
    folders = sorted(path.parent for path in runs_dir.glob("*/run.json")) if runs_dir.is_dir() else []
    return [_read(folder) for folder in folders if not folder.is_symlink()]


def load(run: str) -> RunRecord:
    """A run by id, unique id prefix, exercise name (its newest run), or 'latest'."""
    runs = list_runs()
    if not runs:
        raise SpecError("no runs recorded yet", "run one with `lab run exercise01`")
    if run == "latest":
        found = runs[-1]
    else:
        matches = [r for r in runs if r.run_id.startswith(run)] or [r for r in runs if r.exercise == run]
        if not matches:
            raise SpecError(f"no run '{run}'", "see `lab runs` for recorded runs")
        if len({r.exercise for r in matches}) > 1 and not any(r.run_id == run for r in matches):
            raise SpecError(f"'{run}' matches {len(matches)} runs", "give more of the run id")
        found = matches[-1]
    if found.status == UNREADABLE:
        raise LabStateError(f"run record {found.path}/run.json is corrupted",
                            "its logs and results are still in that folder; remove the folder to drop the run")
    return found


def _loss_plot(record_dir: Path) -> Path | None:
    """loss.png from every rank's metrics-rank*.jsonl (step, loss); None when the run logged none."""
    series: dict[str, list[tuple[float, float]]] = {}
    for metrics in sorted(record_dir.glob("results/*/metrics-rank*.jsonl")):
        step_name, rank = metrics.parent.name, metrics.stem.removeprefix("metrics-rank")
        points = []
        for line in metrics.read_text().splitlines():
            try:
                row = json.loads(line)
                points.append((float(row["step"]), float(row["loss"])))
            except (ValueError, KeyError, TypeError):
                continue
        if points:
            series[f"{step_name} rank {rank}"] = points
    if not series:
        return None
    from matplotlib.figure import Figure  # no pyplot: its global figure list is not safe in threads (lab run --jobs)

    figure = Figure(figsize=(7, 4))
    axes = figure.subplots()
    for label, points in series.items():
        axes.plot([p[0] for p in points], [p[1] for p in points], label=label, linewidth=1.2)
    axes.set_xlabel("step")
    axes.set_ylabel("loss")
    axes.set_title(record_dir.name)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    target = record_dir / "loss.png"
    figure.savefig(target, dpi=110)
    return target
