"""One line per rank of a step that did not pass: how it ended (or where it waited when the lab stopped the run), the
collectives it reached (torch's Flight Recorder, lab/analysis/flight.py) and the last thing it printed, so the rank
that is ahead or behind stands out. Read from the record alone (`lab explain`, `lab report`), when someone looks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lab.analysis.diagnosis import Evidence, NodeEvidence, failure_report_ranks, read_lines
from lab.analysis.diagnosis.logs import exit_text, last_own_line
from lab.analysis.flight import FLIGHT_FOLDER, RankTrace, load_traces
from lab.analysis.record import RunRecord, StepRecord
from lab.analysis.stacks import ProcessStack, load_stacks



@dataclass(frozen=True)
class RankLine:
    rank: int
    node: int | None
    ended: str  # 'exit 0', 'exit 1', 'SIGKILL', 'stopped by the lab', 'ended without an error'
    waiting: str | None = None  # where its stack stood when the lab stopped the run: 'all_reduce (train.py:19)'
    reached: int | None = None  # the last collective it entered (Flight Recorder sequence number)
    collective: str | None = None  # that collective: '#9 all_reduce float[9]'
    still_in: bool = False  # it was still waiting in that collective when asked
    behind: int = 0  # collectives fewer than the furthest rank
    last_output: str | None = None
    late: str | None = None  # it entered that collective well after another rank did: '7.3 s after rank 0'
    call: str | None = None  # its distributed call with the arguments (the jobs' hooks): 'gave up in recv(src=1)...'

    def text(self) -> str:
        parts = [f"rank {self.rank}" + (f" node{self.node}" if self.node is not None else ""), self.ended]
        if self.waiting:  # its stack when the lab stopped it; else the call the hooks saw it in, with its arguments
            parts.append(f"waits in {self.waiting}")
        elif self.call:
            parts.append(self.call)
        if self.collective:
            parts.append(f"{'in' if self.still_in else 'last collective'} {self.collective}"
                         + (f" ({self.behind} behind)" if self.behind else "")
                         + (f", entered {self.late}" if self.late else ""))
        if self.last_output:
            parts.append(f"last output: {self.last_output}")
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return asdict(self)


def step_stacks_dir(record: RunRecord, step: StepRecord):
    """Where a step's stacks and Flight Recorder went (a folder per step for exercises of several steps)."""
    return record.stacks_dir if len(record.steps) == 1 else record.stacks_dir / step.name


def rank_lines(record: RunRecord, step: StepRecord) -> list[RankLine]:
    """A line per process of `step` that has a rank, lowest rank first (two processes claiming one rank get a line
    each); [] when there is only one."""
    folder = step_stacks_dir(record, step)
    nproc = step.nproc_per_node or 1
    nodes = []
    for node in sorted(step.exit_codes):
        log = record.path / "logs" / f"node{node}-{step.name}.log"
        nodes.append(NodeEvidence(node, f"node{node}", step.exit_codes[node],
                                  lines=log.read_text(errors="replace").splitlines() if log.is_file() else []))
    lines = read_lines(Evidence(nodes, nnodes=len(nodes), nproc_per_node=nproc))
    reported = {(rank, node): code for node, exits in failure_report_ranks(lines).items() for rank, code in exits}
    traces = {(trace.rank, trace.node): trace for trace in load_traces(folder / FLIGHT_FOLDER) if trace.rank is not None}
    stacks = {(stack.rank, stack.node): stack for stack in load_stacks(folder)
              if stack.rank is not None and stack.role != "agent" and stack.pid is not None}
    known = set(traces) | set(stacks) | set(reported)
    placed = {node for _, node in known}
    if nproc == 1:
        known |= {(node, node) for node in step.exit_codes if node not in placed}
    else:
        known |= {(line.rank, line.node) for line in lines if line.rank is not None and line.node not in placed}
    furthest = max((trace.reached for trace in traces.values()), default=0)
    found = []
    for rank, node in sorted(known, key=lambda key: (key[0], key[1] if key[1] is not None else -1)):
        trace, stack = traces.get((rank, node)), stacks.get((rank, node))
        said = [line.text for line in lines if line.node == node and (line.rank == rank or nproc == 1)]
        found.append(RankLine(
            rank, node, _ended(rank, node, step, reported, nproc, trace), _waiting(stack),
            trace.reached if trace else None, str(trace.waiting_in or trace.last) if trace and trace.last else None,
            bool(trace and trace.waiting_in), furthest - trace.reached if trace else 0, last_own_line(said),
            _late(trace, traces.values()), _call(trace)))
    return found if len(found) > 1 else []


def _call(trace: RankTrace | None) -> str | None:
    """'gave up in recv(src=1, tag=2) at train.py:12 in step' from the calls the jobs' hooks recorded."""
    calls = trace.calls if trace else None
    if calls is None:
        return None
    if calls.pending:
        return f"waits in {calls.pending[-1]}"
    return f"gave up in {calls.failed[-1]}" if calls.failed else None


LATE_SHOWN = 1.0  # seconds after the first rank that entered the same collective (ranks in step enter within ms)


def _late(trace: RankTrace | None, traces) -> str | None:
    """How long after the first rank this one entered the collective its line shows, when that stands out."""
    shown = trace and (trace.waiting_in or trace.last)
    mine = trace.entered(shown.seq) if shown else None
    if mine is None or mine.entered_at is None:
        return None
    others = [(call.entered_at, other.rank) for other in traces if other is not trace
              for call in [other.entered(shown.seq)] if call is not None and call.entered_at is not None]
    first, rank = min(others, default=(None, None))
    return f"{mine.entered_at - first:.1f} s after rank {rank}" if first is not None and \
        mine.entered_at - first >= LATE_SHOWN else None


def _ended(rank: int, node: int | None, step: StepRecord, reported: dict, nproc: int, trace: RankTrace | None) -> str:
    if (rank, node) in reported:
        return exit_text(reported[(rank, node)])
    code = step.exit_codes.get(node, "?") if node is not None else "?"
    if code == "?":
        return "exit unknown"
    if code is None and trace is not None and trace.ended_without_error:
        return "ended without an error"  # its node (torchrun's agent) was still waiting for the others' when stopped
    if nproc == 1 or code in (0, None):
        return "exit 0" if code == 0 else exit_text(code)
    return f"its node exited {code}"


def _waiting(stack: ProcessStack | None) -> str | None:
    where = stack.waiting() if stack else None
    if where is None:
        return None
    call = where.call or "its own code"
    return call + (f" ({where.user_frame.location})" if where.user_frame else "")


def failed_steps(record: RunRecord) -> list[StepRecord]:
    """The steps that did not end well by themselves: timed out, or some node not at exit 0 (for an exercise step
    expected to fail, only when it timed out)."""
    return [step for step in record.steps if step.timed_out
            or (step.expect != "fail" and any(code != 0 for code in step.exit_codes.values()))]


def format_ranks(record: RunRecord) -> str:
    """'ranks:' then a line per rank, for each step that did not end well ('' when none has several ranks)."""
    blocks = []
    steps = failed_steps(record)
    for step in steps:
        lines = rank_lines(record, step)
        if lines:
            heading = "ranks" + (f" (step {step.name})" if len(record.steps) > 1 else "") + ":"
            blocks.append("\n".join([heading] + [f"  {line.text()}" for line in lines]))
    return "\n".join(blocks)
