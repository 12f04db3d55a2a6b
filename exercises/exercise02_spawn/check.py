"""Checks for exercise 02: N*K ranks, contiguous per node, on distinct hosts, collectives right."""

from lab.jobs.checks import (Check, RunOutcome, all_ranks_present, distinct_hosts, every_rank, group_shares_host,
                        local_ranks_per_group)


def check(run: RunOutcome) -> list[Check]:
    results = run.results
    k, w = run.nproc_per_node, run.world_size
    return [
        all_ranks_present(run, w),
        every_rank(f"world size is {w} on every rank", results, "world_size", w),
        every_rank(f"rank = node_rank * {k} + local_rank", results, "rank",
                   lambda result: result.get("node_rank", -1) * k + result.get("local_rank", -1)),
        local_ranks_per_group(results, "node_rank", run.nnodes, k),
        group_shares_host(results, "node_rank"),
        distinct_hosts(results, "node_rank", run.nnodes),
        every_rank("all_gather returned (rank, node_rank) of every rank, in rank order", results, "gathered",
                   [[rank, rank // k] for rank in range(w)]),
        every_rank(f"all_reduce sum of ranks is W(W-1)/2 = {w * (w - 1) // 2}", results, "all_reduce_sum",
                   w * (w - 1) // 2),
    ]
