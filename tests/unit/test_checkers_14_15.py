"""The checkers of exercises 14 (Accelerate) and 15 (Lightning) on hand-built outcomes of both launches: a right run
passes, each wrong result fails the check about it."""

import copy

import pytest

from lab.jobs.checks import RunOutcome, StepOutcome
from lab.jobs.exercises import find
from tests.unit.checker_helpers import assert_fails, failed

NNODES, NPROC = 2, 2
WORLD = NNODES * NPROC


def two_launches(first: str, second: str, result) -> RunOutcome:
    steps = {name: StepOutcome(name, results={rank: result(rank, name) for rank in range(WORLD)},
                               exit_codes={0: 0, 1: 0}) for name in (first, second)}
    return RunOutcome(nnodes=NNODES, nproc_per_node=NPROC, steps=steps)


def accelerate_rank(rank: int, step: str) -> dict:
    return {"rank": rank, "world_size": WORLD, "local_rank": rank % NPROC, "distributed_type": "MULTI_CPU",
            "backend": "gloo", "batches": 8, "params_hash": "same", "first_loss": 1.2, "final_loss": 0.3}


def lightning_rank(rank: int, step: str) -> dict:
    return {"rank": rank, "world_size": WORLD, "local_rank": rank % NPROC, "node": rank // NPROC, "backend": "gloo",
            "batches": 8, "params_hash": "same", "first_loss": 1.2, "final_loss": 0.3,
            "launched_by_torchrun": step == "torchrun"}


ACCELERATE = (find("14").load_checker(), lambda: two_launches("torchrun", "accelerate-launch", accelerate_rank))
LIGHTNING = (find("15").load_checker(), lambda: two_launches("torchrun", "lightning-launch", lightning_rank))


@pytest.mark.parametrize("checker, run", [ACCELERATE, LIGHTNING])
def test_a_right_run_passes(checker, run):
    assert failed(checker, run()) == []


def spoiled(make, step: str, rank: int, **changes) -> RunOutcome:
    run = copy.deepcopy(make())
    run.steps[step].results[rank].update(changes)
    return run


def test_accelerate_each_wrong_result_fails_its_check():
    checker, make = ACCELERATE
    # `accelerate launch` without --multi_gpu: every machine runs the script alone
    assert_fails(checker, spoiled(make, "accelerate-launch", 1, world_size=1, distributed_type="NO"),
                 "accelerate-launch: Accelerate sees 4 processes")
    assert_fails(checker, spoiled(make, "torchrun", 2, backend="nccl"), "torchrun: backend gloo")
    assert_fails(checker, spoiled(make, "torchrun", 3, batches=32), "every rank got its shard")
    assert_fails(checker, spoiled(make, "torchrun", 1, params_hash="drifted"), "parameters identical")
    assert_fails(checker, spoiled(make, "accelerate-launch", 0, final_loss=2.0), "loss at the end")
    missing = make()
    del missing.steps["torchrun"].results[3]
    assert_fails(checker, missing, "torchrun: all 4 ranks reported")


def test_lightning_each_wrong_result_fails_its_check():
    checker, make = LIGHTNING
    assert_fails(checker, spoiled(make, "lightning-launch", 2, node=0), "node rank = rank // 2")
    assert_fails(checker, spoiled(make, "lightning-launch", 1, launched_by_torchrun=True), "started by Lightning itself")
    assert_fails(checker, spoiled(make, "torchrun", 0, world_size=2), "Lightning's world size is 4")
    assert_fails(checker, spoiled(make, "torchrun", 3, params_hash="drifted"), "parameters identical")
