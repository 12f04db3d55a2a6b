"""Hand-built run outcomes for the checker tests, and asserting which check a wrong result fails."""

from lab.jobs.checks import RunOutcome, StepOutcome


def outcome(results: dict[int, dict], nnodes: int, nproc: int, link: str | None = None) -> RunOutcome:
    step = StepOutcome("main", results=results, exit_codes={node: 0 for node in range(nnodes)})
    return RunOutcome(nnodes=nnodes, nproc_per_node=nproc, steps={"main": step}, link=link)


def failed(checker, run: RunOutcome) -> list[str]:
    return [check.name for check in checker(run) if not check.passed]


def assert_fails(checker, run: RunOutcome, fragment: str) -> None:
    names = failed(checker, run)
    assert any(fragment in name for name in names), f"no failing check mentions {fragment!r}; failed: {names}"
