"""labkit.finish: every rank leaves together and the process ends at once, output flushed."""

import os
import socket
import subprocess
import sys
from pathlib import Path

EXERCISES = Path(__file__).resolve().parents[2] / "exercises"

# A DDP model alive in main's locals holds the group past destroy_process_group: the case finish() is for.
PROGRAM = """
import atexit, sys, torch, labkit
rank = int(sys.argv[1])
atexit.register(lambda: print("finalized", flush=True))
labkit.init(rank=rank, world_size=2)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
model(torch.ones(2, 4)).sum().backward()
print(f"rank {rank} trained", end="")  # no newline, no flush: finish() must flush it
labkit.finish()
print("after finish")
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_finish_ends_every_rank_at_once():
    env = {**os.environ, "PYTHONPATH": str(EXERCISES), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "LAB_BACKEND": "gloo", "OMP_NUM_THREADS": "1"}
    ranks = [subprocess.Popen([sys.executable, "-c", PROGRAM, str(rank)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in range(2)]
    outputs = [rank.communicate(timeout=120) for rank in ranks]
    for rank, (process, (out, err)) in enumerate(zip(ranks, outputs)):
        assert process.returncode == 0, err[-2000:]
        assert out == f"rank {rank} trained", out  # flushed; nothing after finish(), no finalization


def test_finish_runs_no_gloo_teardown():
    """On gloo finish() ends without destroy_process_group: gloo's C++ teardown is where a rank hung (RELIABILITY.md)."""
    program = PROGRAM.replace("labkit.finish()", "torch.distributed.destroy_process_group = lambda *_: print('destroyed')\n"
                                                 "labkit.finish()")
    env = {**os.environ, "PYTHONPATH": str(EXERCISES), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "LAB_BACKEND": "gloo", "OMP_NUM_THREADS": "1"}
    ranks = [subprocess.Popen([sys.executable, "-c", program, str(rank)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in range(2)]
    for rank, (process, (out, err)) in enumerate(zip(ranks, [r.communicate(timeout=120) for r in ranks])):
        assert process.returncode == 0, err[-2000:]
        assert out == f"rank {rank} trained", out
