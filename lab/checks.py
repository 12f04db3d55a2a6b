"""What a checker receives and returns.

Every exercise ships a ``check.py`` with ``check(run: RunOutcome) -> list[Check]``.
The lab builds the RunOutcome from per-rank JSON files and per-node logs; unit tests
build one by hand with wrong values and expect failing checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


def exited_cleanly(step: StepOutcome) -> Check:
    failed = {node: code for node, code in step.exit_codes.items() if code != 0}
    return Check(f"{step.name}: every node exited 0", not failed and bool(step.exit_codes),
                 "" if not failed else f"exit codes {failed}")


def same_value(name: str, results: dict[int, dict], key: str) -> Check:
    """All ranks report the same value under `key` (hashes of parameters, data sizes...)."""
    values = {rank: result.get(key) for rank, result in results.items()}
    distinct = set(map(repr, values.values()))
    passed = bool(values) and len(distinct) == 1 and None not in values.values()
    return Check(name, passed, "" if passed else f"per-rank {key}: {values}")
