"""Checks for exercise 05: each collective's result on each rank, computed here in closed form from the world size."""

from lab.jobs.checks import Check, RunOutcome, all_ranks_present, every_rank


def expected_results(rank: int, world: int) -> dict[str, tuple[str, object]]:
    """What rank `rank` must report for each collective, with the check's name."""
    triangle = world * (world + 1) // 2
    squares = [i * i for i in range(world)]
    return {
        "broadcast": (f"broadcast: every rank holds rank {world - 1}'s values", [10 * (world - 1) + 1, 10 * (world - 1) + 2]),
        "scatter": ("scatter: rank r received piece r of rank 0's list", [10 * rank, 10 * rank + 1]),
        "gather": ("gather: rank 0 holds every rank's r*r, the others nothing", squares if rank == 0 else None),
        "reduce": (f"reduce: rank {world - 1} holds 1+...+{world} = {triangle}, the others nothing",
                   triangle if rank == world - 1 else None),
        "all_reduce_sum": (f"all_reduce SUM: every rank holds {triangle}", triangle),
        "all_reduce_max": (f"all_reduce MAX: every rank holds {(world - 1) ** 2}", (world - 1) ** 2),
        "all_gather": ("all_gather: every rank holds every rank's r*r in rank order", squares),
        "reduce_scatter": ("reduce_scatter: rank j holds the sum of everyone's element j",
                           world * (world - 1) // 2 + 100 * world * rank),
        "all_to_all": ("all_to_all: rank r holds element r from every rank (a transpose)",
                       [100 * sender + rank for sender in range(world)]),
    }


def check(run: RunOutcome) -> list[Check]:
    world = run.world_size
    results = run.results
    checks = [all_ranks_present(run, world), every_rank(f"world size is {world} on every rank", results, "world_size", world)]
    for key, (name, _) in expected_results(0, world).items():
        checks.append(every_rank(name, results, key, lambda result, key=key: expected_results(result.get("rank", -1), world)[key][1]))
    return checks
