"""A test body on every rank: `python -m pytest NODEID -p lab_rank_pytest` started by `lab torchrun` on every node of
the test's lab (from the lab's workspace, the project's root), each rank writing what pytest reported of the test
(exercises/jobhooks/lab_rank_pytest.py) into the run; then one verdict, and one failure text a person can read.
"""

from __future__ import annotations

import json
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from lab.analysis.ranks import format_ranks
from lab.analysis.stacks import load_stacks
from lab.jobs import adhoc
from lab.jobs.targets import Target
from lab.testing.results import JobResult, job_result

RANK_PLUGIN = "lab_rank_pytest"  # exercises/jobhooks/, on every job's PYTHONPATH
RESULTS_FOLDER = "pytest"  # in the run's results/main/ once the ranks are done
FAIL_GRACE = 5.0  # once every rank of a node failed, stop the others this much later (they wait for it in vain)
PG_TIMEOUT_MARGIN = 30  # the ranks' process group outlives the test's timeout: the lab stops a hang, with stacks


class Quiet:
    """A launch reporter for a test: the lines are in the record; the lab's events are kept for the report."""

    def __init__(self):
        self.events: list[str] = []

    def line(self, node: int, text: str) -> None:
        pass

    def event(self, text: str) -> None:
        self.events.append(text)


@dataclass(frozen=True)
class RankOutcome:
    """The test on one rank: passed, failed, skipped, or 'no result' (its process died or was stopped first)."""

    rank: int
    node: int | None
    hostname: str
    outcome: str
    when: str = ""  # the phase that failed or skipped: setup, call, teardown, collect
    text: str = ""  # the failure's traceback, or the skip's reason
    ended: str = ""  # how its process ended


@dataclass
class RankTest:
    """The verdict over every rank, with the job it ran as."""

    job: JobResult
    ranks: list[RankOutcome]
    timeout: float
    lab: str
    events: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        if self.job.timed_out or any(rank.outcome in ("failed", "no result") for rank in self.ranks):
            return "failed"
        if self.ranks and all(rank.outcome == "skipped" for rank in self.ranks):
            return "skipped"
        return "passed" if self.job.passed else "failed"

    @property
    def skip_reason(self) -> str:
        return next((rank.text for rank in self.ranks if rank.outcome == "skipped"), "")

    def failure_text(self) -> str:
        """The diagnosis on top (where the run failed or hung), then which ranks failed and how (a traceback that
        several ranks share shown once), then every rank's line, then where the record is."""
        failed = [rank for rank in self.ranks if rank.outcome in ("failed", "no result")]
        step = self.job.record.steps[0] if self.job.record.steps else None
        nodes = len(step.exit_codes) if step else 0
        head = f"{len(failed)} of {len(self.ranks)} ranks failed" if failed else "every rank passed, but the run failed"
        blocks = [f"{head} (lab '{self.lab}', {nodes} nodes x {step.nproc_per_node if step else '?'}, "
                  f"run {self.job.run_id})"]
        if self.job.timed_out:
            blocks.append(f"timed out after {self.timeout:g} s: the lab took every rank's stack, then stopped them")
        if self.job.why:
            blocks.append("why: " + self.job.why.replace("\n", "\n  "))
        for group in _same_failures([rank for rank in failed if rank.outcome == "failed"]):
            first = group[0]
            who = _ranks_named(group)
            same = " with the same error" if len(group) > 1 else ""
            blocks.append(f"{who} failed in {first.when}{same}:\n{first.text.rstrip()}")
        for rank in failed:
            if rank.outcome == "no result":
                blocks.append(f"rank {rank.rank} (node{rank.node}) gave no result: {rank.ended}")
        ranks = format_ranks(self.job.record)
        if ranks:
            blocks.append(ranks)
        blocks.append(f"record: {self.job.path} (`lab explain {self.job.run_id}`: every finding)")
        return "\n\n".join(blocks)

    def sections(self) -> list[tuple[str, str]]:
        """Each rank's output as its own report section, and the stacks of the ranks of a run the lab stopped; each
        starts with the rank it is, as JUnit XML's system-out and system-err join them without their titles."""
        found = [(f"Captured stdout {who}", f"{who}:\n{run.output}\n") for rank, run in sorted(self.job.ranks.items())
                 if run.output for who in [f"rank {rank} (node{run.node})"]]
        for stack in load_stacks(self.job.record.stacks_dir):
            if stack.role == "worker" and stack.rank is not None:
                who = f"rank {stack.rank} (node{stack.node})"
                found.append((f"Captured stderr stack of {who}", f"stack of {who}:\n{stack.text()}\n"))
        return found


def _same_failures(ranks: list[RankOutcome]) -> list[list[RankOutcome]]:
    groups: dict[tuple[str, str], list[RankOutcome]] = {}
    for rank in ranks:
        groups.setdefault((rank.when, rank.text), []).append(rank)
    return list(groups.values())


def _ranks_named(group: list[RankOutcome]) -> str:
    if len(group) == 1:
        return f"rank {group[0].rank} ({group[0].hostname or f'node{group[0].node}'})"
    return f"ranks {', '.join(str(rank.rank) for rank in group)} ({', '.join(rank.hostname for rank in group)})"


def rank_outcome(rank: int, data: dict | None, job: JobResult) -> RankOutcome:
    """The test on `rank` from the JSON its pytest wrote (None: it wrote none)."""
    run = job.ranks.get(rank)
    node, ended = (run.node, run.ended) if run else (None, "never started")
    if data is None:
        return RankOutcome(rank, node, f"node{node}", "no result", ended=ended)
    reports = data.get("reports") or []
    hostname = data.get("hostname") or f"node{node}"
    failed = next((report for report in reports if report["outcome"] == "failed"), None)
    if failed is not None:
        return RankOutcome(rank, node, hostname, "failed", failed["when"], failed["longrepr"], ended)
    skipped = next((report for report in reports if report["outcome"] == "skipped"), None)
    if skipped is not None:
        return RankOutcome(rank, node, hostname, "skipped", skipped["when"], skipped["longrepr"], ended)
    if any(report["when"] == "call" and report["outcome"] == "passed" for report in reports):
        return RankOutcome(rank, node, hostname, "passed", "call", "", ended)
    return RankOutcome(rank, node, hostname, "no result", ended=ended)


def rank_pytest_args(test_path: Path, test_name: str, rootdir: Path, inifile: Path | None) -> list[str]:
    """`python -m pytest`'s arguments on each rank. no:lab: where the nodes' Python can see lab itself (`--lab-image
    host`, or a workspace holding an editable install's lab.egg-info), its plugin would run the test on ranks again,
    from inside a rank."""
    return ["pytest", f"{test_path}::{test_name}", "-p", RANK_PLUGIN, "-p", "no:lab", "-p", "no:cacheprovider",
            "-p", "no:xdist", "--rootdir", str(rootdir), *(["-c", str(inifile)] if inifile else []), "-o", "addopts=",
            "-q", "-s", "-rN", "--no-header", "--tb=native"]


def run_test(target: Target, test_path: Path, test_name: str, rootdir: Path, inifile: Path | None,
             nproc_per_node: int, timeout: float) -> RankTest:
    """Run test `test_name` (what follows '::' in its node id) of file `test_path` on every rank of `target`."""
    token = secrets.token_hex(4)
    host_results = target.transport.host_shared_dir / RESULTS_FOLDER / token
    host_results.mkdir(parents=True)
    args = rank_pytest_args(test_path, test_name, rootdir, inifile)
    env = {"LAB_PYTEST_RESULTS": f"{target.transport.shared_dir}/{RESULTS_FOLDER}/{token}",
           "LAB_PYTEST_PG_TIMEOUT": str(int(timeout) + PG_TIMEOUT_MARGIN), "PYTHONDONTWRITEBYTECODE": "1"}
    reporter = Quiet()
    try:
        record = adhoc.run_torchrun(target, nproc_per_node, "static", Path("-m"), args, env, int(timeout), reporter,
                                    fail_grace=FAIL_GRACE)
        record.save_results("main", host_results)
    finally:
        shutil.rmtree(host_results, ignore_errors=True)
    job = job_result(record)
    world = target.nnodes * nproc_per_node
    outcomes = [rank_outcome(rank, _read(record.path / "results" / "main" / f"rank{rank}.json"), job)
                for rank in range(world)]
    return RankTest(job, outcomes, timeout, target.label, reporter.events)


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
