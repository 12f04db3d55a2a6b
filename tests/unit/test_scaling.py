"""Timeouts that grow with the world, and the engine calls `lab up`/`lab down` make side by side."""

import threading
import time

import pytest

from lab.errors import EngineError
from lab.jobs.exercises import (
    PG_TIMEOUT,
    SECONDS_PER_EXTRA_PROCESS,
    LaunchContext,
    find,
    job_processes,
    load_exercise,
    step_command,
    step_timeout,
    torchrun_argv,
)
from lab.nodes import driver
from lab.nodes.driver import in_parallel


def context(nnodes: int, nproc_per_node: int, **extra) -> LaunchContext:
    return LaunchContext(node_rank=0, nnodes=nnodes, nproc_per_node=nproc_per_node, master_addr="node0",
                         master_port=29500, python="/py", exercises_dir="/ex", results_dir="/r", work_dir="/w",
                         run_id="run1-main", **extra)


def test_torchrun_counts_an_agent_per_node():
    assert job_processes("torchrun", 16, 2) == 48
    assert job_processes("per-node", 16, 2) == 32


def test_a_step_keeps_its_manifest_timeout_on_the_manifest_world_and_grows_beyond_it():
    join, collectives = find("exercise01"), find("exercise05")  # per-node 2 x 1 and torchrun 2 x 2, both 60 s
    assert step_timeout(join, join.steps[0], 2, 1) == join.timeout
    assert step_timeout(join, join.steps[0], 1, 1) == join.timeout  # never shrunk
    assert step_timeout(join, join.steps[0], 32, 1) == join.timeout + 30 * SECONDS_PER_EXTRA_PROCESS
    assert step_timeout(collectives, collectives.steps[0], 2, 2) == collectives.timeout
    assert step_timeout(collectives, collectives.steps[0], 16, 2) == collectives.timeout + 42 * SECONDS_PER_EXTRA_PROCESS


def test_a_steps_own_timeout_is_the_one_that_grows(tmp_path):
    folder = tmp_path / "exercise01_join"
    folder.mkdir()
    (folder / "prog.py").write_text("")
    (folder / "exercise.yaml").write_text("launcher: per-node\nprogram: prog.py\ntimeout: 50\nnodes: 2\n"
                                          "steps:\n  - name: short\n    timeout: 5\n  - name: main\n")
    exercise = load_exercise(folder)
    short, main = exercise.steps
    assert (step_timeout(exercise, short, 2, 1), step_timeout(exercise, main, 2, 1)) == (5, 50)
    assert step_timeout(exercise, short, 4, 1) == 5 + 2 * SECONDS_PER_EXTRA_PROCESS


def test_the_process_group_and_rendezvous_timeouts_grow_with_the_world():
    small, big = context(2, 2), context(32, 1)
    assert small.pg_timeout == PG_TIMEOUT
    assert big.pg_timeout == PG_TIMEOUT + (64 - 6) * SECONDS_PER_EXTRA_PROCESS
    assert f"join_timeout={big.pg_timeout}," in " ".join(torchrun_argv(big))
    join = find("exercise01")
    _, env = step_command(join, join.steps[0], big)
    assert env["LAB_PG_TIMEOUT"] == str(big.pg_timeout)
    assert context(32, 1, pg_timeout=7).pg_timeout == 7  # given: kept


def test_a_steps_own_pg_timeout_wins_over_the_grown_one():
    # exercise12 sets LAB_PG_TIMEOUT: 5 so each broken step fails in seconds, and 2 in its first two steps
    troubleshooting = find("exercise12")
    steps = {step.name: step for step in troubleshooting.steps}
    timeouts = {name: step_command(troubleshooting, steps[name], context(32, 2))[1]["LAB_PG_TIMEOUT"]
                for name in ("wrong-master-addr", "world-size-mismatch")}
    assert timeouts == {"wrong-master-addr": "2", "world-size-mismatch": "5"}


def test_in_parallel_runs_side_by_side_and_keeps_item_order(monkeypatch):
    monkeypatch.setattr(driver, "ENGINE_THREADS", 4)
    running, most = [0], [0]
    lock = threading.Lock()

    def square(number: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return number * number

    assert in_parallel(square, list(range(10))) == [n * n for n in range(10)]
    assert most[0] == 4  # bounded by ENGINE_THREADS, and more than one at a time
    assert in_parallel(square, []) == []


def test_in_parallel_raises_the_earliest_items_failure_and_drops_what_has_not_started(monkeypatch):
    monkeypatch.setattr(driver, "ENGINE_THREADS", 2)
    started = []

    def start(index: int) -> None:
        started.append(index)
        time.sleep(0.05 if index == 1 else 0.01)
        if index in (1, 2):  # node2 fails first, node1 is the earlier item
            raise EngineError(f"Docker refused to start node{index}: no")

    with pytest.raises(EngineError, match="start node1"):
        in_parallel(start, list(range(40)))
    assert len(started) < 40
