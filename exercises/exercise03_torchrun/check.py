"""Checks for exercise 03: torchrun's rank layout, placement on hosts, and a real DDP training run."""

import math

from lab.jobs.checks import (Check, RunOutcome, all_ranks_present, distinct_hosts, every_rank, expect_below,
                        group_shares_host, local_ranks_per_group, same_value)


def check(run: RunOutcome) -> list[Check]:
    results = run.results
    k, w = run.nproc_per_node, run.world_size
    rank0 = results.get(0, {})
    return [
        all_ranks_present(run, w),
        every_rank(f"WORLD_SIZE is {w} on every rank", results, "world_size", w),
        every_rank(f"the process group has {w} members on every rank", results, "pg_world_size", w),
        every_rank(f"LOCAL_WORLD_SIZE is {k} on every rank", results, "local_world_size", k),
        every_rank(f"RANK = GROUP_RANK * {k} + LOCAL_RANK", results, "rank",
                   lambda result: result.get("group_rank", -1) * k + result.get("local_rank", -1)),
        local_ranks_per_group(results, "group_rank", run.nnodes, k),
        group_shares_host(results, "group_rank"),
        distinct_hosts(results, "group_rank", run.nnodes),
        every_rank(f"DistributedSampler gave every rank ceil(dataset / {w}) samples", results, "samples",
                   lambda result: math.ceil(result.get("dataset_size", 0) / w)),
        same_value("parameters identical on all ranks after training", results, "params_hash"),
        expect_below("loss at the end is below the loss at the start", rank0.get("final_loss"), rank0.get("first_loss")),
    ]
