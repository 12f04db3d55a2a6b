"""Checks for exercise 15: both launches made one gloo group of every process on both nodes, Lightning's
DistributedSampler split the data, replicas agree, and the loss fell."""

from lab.jobs.checks import Check, RunOutcome, all_ranks_present, every_rank, in_step, trained_together

SAMPLES, BATCH = 512, 16


def step_checks(results: dict[int, dict], world: int, nproc: int) -> list[Check]:
    return [
        every_rank(f"Lightning's world size is {world} on every rank", results, "world_size", world),
        every_rank(f"node rank = rank // {nproc} on every rank", results, "node", lambda result: result.get("rank", -1) // nproc),
        every_rank("backend gloo on every rank", results, "backend", "gloo"),
        *trained_together(results, world, SAMPLES, BATCH),
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
