"""Checks for exercise 10: after a killed worker, and after a lost node, training restarted from the snapshot
and completed every epoch, with the world it should have had."""

import math

from lab.jobs.checks import (KILLED_STATUSES, Check, RunOutcome, StepOutcome, all_ranks_present, every_rank, expect_equal,
                        in_step, same_value)

KILLED_NODE = 1  # the manifest's fault: node


def every_rank_above_zero(name: str, results: dict[int, dict], key: str) -> Check:
    wrong = {rank: result.get(key) for rank, result in sorted(results.items())
             if not isinstance(result.get(key), int) or result[key] <= 0}
    passed = bool(results) and not wrong
    return Check(name, passed, "" if passed else f"per-rank {key}: {wrong}" if results else "no results")


def completed(step: StepOutcome, world: int) -> list[Check]:
    """The last launch of the workers trained to the end on a world of `world` ranks, and the replicas agree."""
    results = step.results
    return [in_step(step.name, check) for check in [
        all_ranks_present(step, world),
        every_rank(f"the final world had {world} ranks", results, "pg_world_size", world),
        every_rank_above_zero("resumed from a snapshot (start epoch > 0)", results, "start_epoch"),
        every_rank("trained the remaining epochs up to the last", results, "epochs_trained",
                   lambda result: list(range(result.get("start_epoch") or 0, result.get("epochs_total") or 0))),
        every_rank(f"DistributedSampler gave every rank ceil(dataset / {world}) samples", results, "samples",
                   lambda result: math.ceil(result.get("dataset_size", 0) / world)),
        same_value("parameters identical on all ranks", results, "params_hash"),
    ]]


def first_world(step: StepOutcome) -> int | None:
    """World size of the first launch that saved a snapshot, from the history kept in it."""
    history = step.results.get(0, {}).get("history") or [{}]
    return history[0].get("world_size")


def lost_node(step: StepOutcome) -> Check:
    """The lab really took the node away: it ended killed (see KILLED_STATUSES), not by finishing."""
    status = step.exit_codes.get(KILLED_NODE, "no status")
    return Check(f"{step.name}: node{KILLED_NODE} was killed by the lab", status in KILLED_STATUSES,
                 "" if status in KILLED_STATUSES else f"exit status {status}")


def check(run: RunOutcome) -> list[Check]:
    worker, node = run.step("kill-worker"), run.step("kill-node")
    k, world = run.nproc_per_node, run.world_size
    on_killed_node = {rank: result for rank, result in worker.results.items() if result.get("node_rank") == KILLED_NODE}
    return [
        *completed(worker, world),
        every_rank_above_zero(f"kill-worker: torchrun restarted the workers on node{KILLED_NODE} "
                              "(TORCHELASTIC_RESTART_COUNT > 0)", on_killed_node, "restart_count"),
        *completed(node, world - k),
        expect_equal(f"kill-node: training began on {run.nnodes} nodes ({world} ranks)", first_world(node), world),
        lost_node(node),
    ]
