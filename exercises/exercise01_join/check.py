"""Checks for exercise 01: every node joined once, as its own rank, on its own host, and the sum is right."""

from lab.checks import Check, RunOutcome, all_ranks_present, distinct_hosts, every_rank


def check(run: RunOutcome) -> list[Check]:
    results = run.results
    n = run.world_size
    return [
        all_ranks_present(run, n),
        every_rank("each node joined as rank NODE_RANK", results, "node_rank", lambda result: result["rank"]),
        every_rank(f"world size is {n} on every rank", results, "world_size", n),
        distinct_hosts(results, "node_rank", run.nnodes),
        every_rank(f"all_reduce sum is 1+...+{n} = {n * (n + 1) // 2} on every rank", results, "all_reduce_sum",
                   n * (n + 1) // 2),
    ]
