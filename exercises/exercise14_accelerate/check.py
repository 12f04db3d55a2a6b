"""Checks for exercise 14: both launches gave every rank its place in one gloo group, prepare() made the replicas
equal (they started different) and split the data, and the loss fell."""

from lab.jobs.checks import Check, RunOutcome, all_ranks_present, every_rank, in_step, trained_together

SAMPLES, BATCH = 512, 16


def step_checks(results: dict[int, dict], world: int) -> list[Check]:
    return [
        every_rank(f"Accelerate sees {world} processes on every rank", results, "world_size", world),
        every_rank("distributed type MULTI_CPU on every rank", results, "distributed_type", "MULTI_CPU"),
        every_rank("backend gloo on every rank", results, "backend", "gloo"),
        *trained_together(results, world, SAMPLES, BATCH),
    ]


def check(run: RunOutcome) -> list[Check]:
    world = run.world_size
    checks = []
    for step in ("torchrun", "accelerate-launch"):
        results = run.step(step).results
        checks += [in_step(step, all_ranks_present(run.step(step), world))]
        checks += [in_step(step, found) for found in step_checks(results, world)]
    return checks
