"""What a job run from a test came to, per rank, read from its run record alone: how each rank ended, what it
printed, and the lab's diagnosis. The `lab_cluster` fixture returns it; a test body run on ranks is read from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab.analysis.diagnosis import Evidence, NodeEvidence, failure_report_ranks, read_lines
from lab.analysis.diagnosis.findings import Finding, format_findings
from lab.analysis.record import RunRecord
from lab.analysis.timeline import exit_text


@dataclass(frozen=True)
class RankRun:
    """One rank of a job: its node, its exit code (None: stopped by the lab, or ended by torchrun when another rank
    failed) and how it ended in words, and every line it printed."""

    rank: int
    node: int
    exit_code: int | None
    ended: str
    output: str


@dataclass
class JobResult:
    """A job's record, read: `passed`, each rank (`ranks[r].exit_code`, `.output`), `exit_codes` per node, the run's
    folder (`path`), and the diagnosis of a run that failed or hung (`diagnosis`, `why`)."""

    record: RunRecord
    ranks: dict[int, RankRun] = field(default_factory=dict)
    node_output: dict[int, str] = field(default_factory=dict)  # every line of each node, torchrun's own included

    @property
    def passed(self) -> bool:
        return self.record.passed

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def path(self) -> Path:
        return self.record.path

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def exit_codes(self) -> dict[int, int | None]:
        return dict(self.record.steps[0].exit_codes) if self.record.steps else {}

    @property
    def timed_out(self) -> bool:
        return bool(self.record.steps and self.record.steps[0].timed_out)

    @property
    def diagnosis(self) -> list[Finding]:
        return [Finding.from_dict(finding) for finding in self.record.diagnosis]

    @property
    def why(self) -> str:
        """The top finding (cause, evidence, fix) as `lab` prints it; '' for a run that passed."""
        return format_findings(self.diagnosis) if self.record.diagnosis else ""

    def output(self, rank: int) -> str:
        return self.ranks[rank].output if rank in self.ranks else ""

    def __repr__(self) -> str:
        codes = ", ".join(f"rank {rank}: {run.ended}" for rank, run in sorted(self.ranks.items()))
        return f"<JobResult {self.run_id} {self.status} ({codes})>"


def job_result(record: RunRecord) -> JobResult:
    """Each rank of the record's (single) step: placed by static rendezvous (rank = node x nproc + local rank), its
    exit code from torchrun's failure report, else its node's, and its own lines."""
    result = JobResult(record)
    if not record.steps:
        return result
    step = record.steps[0]
    nproc = step.nproc_per_node or 1
    nodes = []
    for node, code in sorted(step.exit_codes.items()):
        log = record.path / "logs" / f"node{node}-{step.name}.log"
        nodes.append(NodeEvidence(node, f"node{node}", code,
                                  lines=log.read_text(errors="replace").splitlines() if log.is_file() else []))
    lines = read_lines(Evidence(nodes, nnodes=len(nodes), nproc_per_node=nproc))
    reported = {rank: code for exits in failure_report_ranks(lines).values() for rank, code in exits}
    for evidence in nodes:
        result.node_output[evidence.index] = "\n".join(evidence.lines)
        for local in range(nproc):
            rank = evidence.index * nproc + local
            code = reported.get(rank, evidence.exit_code if evidence.exit_code in (0, None) or nproc == 1 else None)
            if rank in reported or code is not None or evidence.exit_code is None:
                ended = exit_text(code)
            else:
                ended = f"ended by torchrun when its node failed (node exit {evidence.exit_code})"
            if evidence.index in step.oom_killed:
                ended += "; the kernel killed a process of its node for memory (OOM)"
            output = "\n".join(line.text for line in lines if line.node == evidence.index and line.rank == rank)
            result.ranks[rank] = RankRun(rank, evidence.index, code, ended, output)
    return result
