"""`lab stacks` on a real 2-node lab while a job hangs: one worker per rank, placed and explained."""

import signal
from pathlib import Path

import pytest

from .conftest import lab_json
from .test_reliability import start_lab, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Written for two terminals; rank 1 never calls all_reduce, so rank 0 waits in it for ever.
HANGS = """\
import os, sys, time
import torch
import torch.distributed as dist

rank, world_size = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("gloo", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                        rank=rank, world_size=world_size)
if rank == 1:
    time.sleep(600)
dist.all_reduce(torch.ones(1))
"""


def line_of(text: str) -> int:
    return next(number for number, line in enumerate(HANGS.splitlines(), 1) if text in line)


def test_stacks_of_a_hung_job_name_each_rank_and_where_it_waits(two_nodes, tmp_path):
    script = tmp_path / "hangs.py"
    script.write_text(HANGS)
    job = start_lab("exec", "--name", two_nodes, "--timeout", "300", "--copy", str(script), "--",
                    "python", "hangs.py", "{rank}", "{world_size}")

    def hung_workers():
        captured = lab_json("stacks", "--name", two_nodes)
        workers = [stack for stack in captured["processes"] if "hangs.py" in " ".join(stack["cmdline"])]
        waiting = any(worker["summary"].startswith("rank 0 node0: all_reduce") for worker in workers)
        return (captured, workers) if waiting and len(workers) == 2 else None

    try:
        captured, workers = wait_for(hung_workers, seconds=180, what="rank 0 waiting in all_reduce")
    finally:
        job.send_signal(signal.SIGINT)
        job.communicate(timeout=60)
    workers.sort(key=lambda worker: worker["rank"])
    assert [(worker["role"], worker["rank"], worker["node"]) for worker in workers] == [("worker", 0, 0), ("worker", 1, 1)]
    assert [worker["summary"] for worker in workers] == [
        f"rank 0 node0: all_reduce (hangs.py:{line_of('all_reduce')})",
        f"rank 1 node1: not in a distributed call (hangs.py:{line_of('time.sleep')})",
    ]
    assert {worker["env"]["MASTER_ADDR"] for worker in workers} == {"node0"}
    main_thread = workers[0]["threads"][0]
    assert main_thread["name"] == "MainThread" and main_thread["frames"][-1]["function"] == "all_reduce"
    [stacks_dir] = {Path(captured["records"][worker["run_id"]]) for worker in workers}
    assert (stacks_dir / "summary.txt").read_text().splitlines() == [worker["summary"] for worker in workers]
    for worker in workers:
        assert worker["summary"] in (stacks_dir / f"node{worker['node']}-{worker['pid']}.txt").read_text()
