"""Checks for exercise 14: both launches gave every rank its place in one gloo group, prepare() made the replicas
equal (they started different) and split the data, and the loss fell."""

import math

from lab.jobs.checks import Check, RunOutcome, all_ranks_present, every_rank, expect_below, in_step, same_value

SAMPLES, BATCH = 512, 16


def step_checks(results: dict[int, dict], world: int) -> list[Check]:
    rank0 = results.get(0, {})
    return [
        every_rank(f"Accelerate sees {world} processes on every rank", results, "world_size", world),
        every_rank("distributed type MULTI_CPU on every rank", results, "distributed_type", "MULTI_CPU"),
        every_rank("backend gloo on every rank", results, "backend", "gloo"),
        every_rank(f"every rank got its shard: ceil({SAMPLES} / {world} / {BATCH}) batches", results, "batches",
                   math.ceil(SAMPLES / world / BATCH)),
        same_value("parameters identical on all ranks after training", results, "params_hash"),
        expect_below("loss at the end is below the loss at the start", rank0.get("final_loss"), rank0.get("first_loss")),
    ]


def check(run: RunOutcome) -> list[Check]:
    world = run.world_size
    checks = []
    for step in ("torchrun", "accelerate-launch"):
        results = run.step(step).results
        checks += [in_step(step, all_ranks_present(run.step(step), world))]
        checks += [in_step(step, found) for found in step_checks(results, world)]
    return checks
