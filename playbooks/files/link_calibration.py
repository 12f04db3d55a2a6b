"""A short calibration of the link for `lab forecast`: gloo all_reduce of float32 tensors, sizes swept, at 2 ranks
(one process on each of two nodes), and the cost of the reduction itself on one node's CPU.

Run by lab/jobs/profiling.py right after a profiled job, on the same nodes and link, with RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set. Each size is repeated for about BUDGET seconds (the count agreed by both ranks) and the
median kept; the sweep stops at the first size whose one call takes longer than SLOW_SECONDS (a slow link). Rank 0 prints
one line `CALIBRATION {...}`: sizes with seconds, and the reduction's seconds per byte (an add of two tensors, what
gloo's ring does with every chunk it receives).
"""

import datetime
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

SIZES = [4 ** power * 1024 for power in range(0, 8)]  # 1 KiB .. 16 MiB
BUDGET = 0.25
SLOW_SECONDS = 0.6
MAX_REPEATS = 50


def timed(call, repeats: int) -> float:
    """Median seconds of `call`, repeated `repeats` times after one warm-up call."""
    call()
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        call()
        times.append(time.perf_counter() - begin)
    return statistics.median(times)


def agreed(seconds: float) -> float:
    """The slowest rank's figure, so that every rank decides alike (a different count of calls would hang gloo)."""
    value = torch.tensor([seconds])
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value[0])


def main() -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rows = []
    for size in SIZES:
        tensor = torch.ones(size // 4)
        once = agreed(timed(lambda: dist.all_reduce(tensor), 1))
        repeats = max(2, min(MAX_REPEATS, int(BUDGET / max(once, 1e-6))))
        seconds = agreed(timed(lambda: dist.all_reduce(tensor), repeats))
        rows.append([size, seconds])
        if seconds > SLOW_SECONDS:
            break
    left, right = torch.ones(4 * 1024 * 1024 // 4), torch.ones(4 * 1024 * 1024 // 4)
    reduce_seconds = timed(lambda: left.add_(right), 20)
    if dist.get_rank() == 0:
        print("CALIBRATION " + json.dumps({"world_size": dist.get_world_size(), "all_reduce": rows,
                                           "reduce_seconds_per_byte": reduce_seconds / (4 * 1024 * 1024),
                                           "torch": torch.__version__}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
