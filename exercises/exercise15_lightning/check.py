"""Checks for exercise 15: both launches made one gloo group of every process on both nodes, Lightning's
DistributedSampler split the data, replicas agree, and the loss fell."""

import math

from lab.jobs.checks import Check, RunOutcome, all_ranks_present, every_rank, expect_below, in_step, same_value

SAMPLES, BATCH = 512, 16


def step_checks(results: dict[int, dict], world: int, nproc: int) -> list[Check]:
    rank0 = results.get(0, {})
    return [
        every_rank(f"Lightning's world size is {world} on every rank", results, "world_size", world),
        every_rank(f"node rank = rank // {nproc} on every rank", results, "node", lambda result: result.get("rank", -1) // nproc),
        every_rank("backend gloo on every rank", results, "backend", "gloo"),
        every_rank(f"every rank got its shard: ceil({SAMPLES} / {world} / {BATCH}) batches", results, "batches",
                   math.ceil(SAMPLES / world / BATCH)),
        same_value("parameters identical on all ranks after training", results, "params_hash"),
        expect_below("loss at the end is below the loss at the start", rank0.get("final_loss"), rank0.get("first_loss")),
    ]


def check(run: RunOutcome) -> list[Check]:
    world, nproc = run.world_size, run.nproc_per_node
    checks = []
    for step, by_torchrun in (("torchrun", True), ("lightning-launch", False)):
        results = run.step(step).results
        checks.append(in_step(step, all_ranks_present(run.step(step), world)))
        checks += [in_step(step, found) for found in step_checks(results, world, nproc)]
        checks.append(in_step(step, every_rank(f"started by {'torchrun' if by_torchrun else 'Lightning itself'}",
                                               results, "launched_by_torchrun", by_torchrun)))
    return checks
