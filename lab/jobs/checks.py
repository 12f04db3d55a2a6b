"""What a checker receives and returns.

Every exercise ships a ``check.py`` with ``check(run: RunOutcome) -> list[Check]``.
The lab builds the RunOutcome from per-rank JSON files and per-node logs; unit tests
build one by hand with wrong values and expect failing checks.
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class StepOutcome:
    """One launch of an exercise across all nodes."""

    name: str
    results: dict[int, dict] = field(default_factory=dict)  # global rank -> that rank's JSON
    exit_codes: dict[int, int | None] = field(default_factory=dict)  # node index -> exit status (None: killed)
    logs: dict[int, str] = field(default_factory=dict)  # node index -> combined output
    expect: str = "pass"

    @property
    def succeeded(self) -> bool:
        return bool(self.exit_codes) and all(code == 0 for code in self.exit_codes.values())

    def log_text(self) -> str:
        return "\n".join(self.logs[index] for index in sorted(self.logs))


@dataclass
class RunOutcome:
    nnodes: int
    nproc_per_node: int
    backend: str = "gloo"
    steps: dict[str, StepOutcome] = field(default_factory=dict)
    link: str | None = None  # the lab's link shaping (`lab up --link`); None: unshaped or unknown

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    @property
    def last(self) -> StepOutcome:
        return list(self.steps.values())[-1]

    @property
    def results(self) -> dict[int, dict]:
        """Results of the last step: what single-step exercises check."""
        return self.last.results

    def step(self, name: str) -> StepOutcome:
        return self.steps.get(name) or StepOutcome(name)


def expect_equal(name: str, actual, expected) -> Check:
    passed = actual == expected
    return Check(name, passed, "" if passed else f"expected {expected!r}, got {actual!r}")


def all_ranks_present(run_or_step, world_size: int) -> Check:
    results = run_or_step.results
    missing = sorted(set(range(world_size)) - set(results))
    extra = sorted(set(results) - set(range(world_size)))
    passed = not missing and not extra
    detail = "" if passed else f"missing ranks {missing}" + (f", unexpected {extra}" if extra else "")
    return Check(f"all {world_size} ranks reported", passed, detail)


def exited_cleanly(step: StepOutcome, killed_on_purpose: int | None = None) -> Check:
    """Every node exited 0, except the one a kill-node fault took away (its status says nothing of the run)."""
    failed = {node: code for node, code in step.exit_codes.items() if code != 0 and node != killed_on_purpose}
    name = f"{step.name}: every node exited 0" if killed_on_purpose is None else \
        f"{step.name}: every surviving node exited 0 (node{killed_on_purpose} killed on purpose)"
    return Check(name, not failed, f"exit codes {failed}" if failed else "")


def same_value(name: str, results: dict[int, dict], key: str) -> Check:
    """All ranks report the same value under `key` (hashes of parameters, data sizes...)."""
    values = {rank: result.get(key) for rank, result in results.items()}
    distinct = set(map(repr, values.values()))
    passed = bool(values) and len(distinct) == 1 and None not in values.values()
    return Check(name, passed, "" if passed else f"per-rank {key}: {values}")


def in_step(step_name: str, check: Check) -> Check:
    """The same check, named after the step it looked at (multi-step exercises check each step)."""
    return Check(f"{step_name}: {check.name}", check.passed, check.detail)


def every_rank(name: str, results: dict[int, dict], key: str, expected) -> Check:
    """Each rank reports `expected` under `key`; `expected` may be a function of that rank's result."""
    return _every_rank(name, results, key, expected, lambda actual, want: actual == want)


def _every_rank(name: str, results: dict[int, dict], key: str, expected, agrees) -> Check:
    wrong = {}
    for rank, result in sorted(results.items()):
        want = expected(result) if callable(expected) else expected
        if not agrees(result.get(key), want):
            wrong[rank] = f"expected {want!r}, got {result.get(key)!r}"
    passed = bool(results) and not wrong
    detail = "no results" if not results else "; ".join(f"rank {rank}: {text}" for rank, text in wrong.items())
    return Check(name, passed, "" if passed else detail)


def _groups(results: dict[int, dict], group_key: str) -> dict:
    groups: dict = {}
    for rank, result in sorted(results.items()):
        groups.setdefault(result.get(group_key), []).append(rank)
    return groups


def local_ranks_per_group(results: dict[int, dict], group_key: str, ngroups: int, nproc: int) -> Check:
    """Groups (nodes) 0..ngroups-1 each hold local ranks 0..nproc-1, once each."""
    groups = _groups(results, group_key)
    wrong = []
    if sorted(groups, key=repr) != list(range(ngroups)):
        wrong.append(f"{group_key} values {sorted(groups, key=repr)}, expected {list(range(ngroups))}")
    for group, ranks in sorted(groups.items(), key=lambda item: repr(item[0])):
        local = sorted((results[rank].get("local_rank") for rank in ranks), key=repr)
        if local != list(range(nproc)):
            wrong.append(f"{group_key} {group} has local ranks {local}")
    passed = bool(results) and not wrong
    return Check(f"each of {ngroups} nodes has local ranks 0..{nproc - 1}", passed, "; ".join(wrong))


def group_shares_host(results: dict[int, dict], group_key: str) -> Check:
    """All ranks of one group (node) ran on the same hostname."""
    split = {group: sorted({results[rank].get("hostname") for rank in ranks}, key=repr)
             for group, ranks in _groups(results, group_key).items()}
    wrong = {group: hosts for group, hosts in split.items() if len(hosts) != 1}
    passed = bool(results) and not wrong
    detail = "; ".join(f"{group_key} {group} ran on {hosts}" for group, hosts in wrong.items())
    return Check("ranks of each node share one hostname", passed, detail)


def distinct_hosts(results: dict[int, dict], group_key: str, ngroups: int) -> Check:
    """Each group (node) ran on a hostname of its own, and there are `ngroups` of them."""
    owners: dict = {}
    for result in results.values():
        owners.setdefault(result.get("hostname"), set()).add(result.get(group_key))
    shared = {host: sorted(groups, key=repr) for host, groups in owners.items() if len(groups) > 1}
    passed = len(owners) == ngroups and not shared
    parts = [] if len(owners) == ngroups else [f"{len(owners)} distinct hostnames {sorted(owners, key=repr)}"]
    parts += [f"{host} hosts {group_key} {groups}" for host, groups in shared.items()]
    return Check(f"{ngroups} nodes ran on {ngroups} distinct hosts", passed, "; ".join(parts))


def expect_below(name: str, actual, bound) -> Check:
    passed = isinstance(actual, (int, float)) and isinstance(bound, (int, float)) and actual < bound
    return Check(name, passed, "" if passed else f"expected below {bound!r}, got {actual!r}")


def trained_together(results: dict[int, dict], world: int, samples: int, batch: int) -> list[Check]:
    """A data-parallel training run: every rank had its own shard of `samples` in batches of `batch` (its
    'batches'), the replicas ended equal ('params_hash') and rank 0's loss fell ('first_loss', 'final_loss')."""
    rank0 = results.get(0, {})
    return [every_rank(f"every rank got its shard: ceil({samples} / {world} / {batch}) batches", results, "batches",
                       math.ceil(samples / world / batch)),
            same_value("parameters identical on all ranks after training", results, "params_hash"),
            expect_below("loss at the end is below the loss at the start", rank0.get("final_loss"),
                         rank0.get("first_loss"))]


def all_different(name: str, results: dict[int, dict], key: str) -> Check:
    """Every rank reports its own value under `key`: replicas that must NOT agree."""
    values = {rank: result.get(key) for rank, result in results.items()}
    passed = len(values) > 1 and None not in values.values() and len(set(map(repr, values.values()))) == len(values)
    return Check(name, passed, "" if passed else f"per-rank {key}: {values}")


def _close(actual, expected, tolerance: float) -> bool:
    if isinstance(expected, (list, tuple)):
        return (isinstance(actual, (list, tuple)) and len(actual) == len(expected)
                and all(_close(a, e, tolerance) for a, e in zip(actual, expected)))
    if not isinstance(actual, (int, float)) or isinstance(actual, bool):
        return False
    return abs(actual - expected) <= tolerance * max(1.0, abs(expected))


def every_rank_close(name: str, results: dict[int, dict], key: str, expected, tolerance: float = 1e-5) -> Check:
    """every_rank for floats (or lists of them) computed in float32: equal within a relative `tolerance`."""
    return _every_rank(name, results, key, expected, lambda actual, want: _close(actual, want, tolerance))


# What a node's exit status looks like when the lab killed it (step timeout, fault): no status,
# SIGKILL as a subprocess reports it, SIGKILL through a shell or `docker exec`.
KILLED_STATUSES = (None, -9, 137)


def failed_on_its_own(step: StepOutcome) -> Check:
    """Every node exited non-zero by itself, before the lab had to kill it: a failure that is fast and reported."""
    wrong = {node: code for node, code in sorted(step.exit_codes.items()) if code == 0 or code in KILLED_STATUSES}
    passed = bool(step.exit_codes) and not wrong
    detail = "no exit codes" if not step.exit_codes else f"exit codes {wrong} (0 = did not fail, None/-9/137 = killed)"
    return Check(f"{step.name}: every node failed on its own (non-zero exit, not killed)", passed, "" if passed else detail)


def log_matches(name: str, step: StepOutcome, pattern: str, nodes: Iterable[int]) -> Check:
    """Each of `nodes` printed something matching the regex `pattern`: the telltale of an expected failure."""
    regex = re.compile(pattern)
    nodes = list(nodes)
    missing = [node for node in nodes if not regex.search(step.logs.get(node, ""))]
    passed = bool(nodes) and not missing
    return Check(name, passed, "" if passed else f"no match for /{pattern}/ in the log of node(s) {missing or nodes}")


def load_sibling(anchor_file: str, name: str) -> ModuleType:
    """Import `name`.py from the folder of `anchor_file` (a checker's __file__): data the exercise's program shares."""
    path = Path(anchor_file).resolve().parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"lab_sibling_{path.parent.name}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
