"""One rank of the all_reduce benchmark (gloo), launched once per node by bench/run.py through `lab exec`.

Rank 0 prints one `BENCH {json}` line per size: average seconds per all_reduce over `iters` timed calls,
after warm-up calls, each measurement started from a barrier so every rank begins together.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int, required=True)
parser.add_argument("--world-size", type=int, required=True)
parser.add_argument("--sizes", required=True, help="comma-separated byte counts")
parser.add_argument("--budget", type=float, default=0.5, help="rough seconds to spend per size")
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                        rank=args.rank, world_size=args.world_size)
for size in map(int, args.sizes.split(",")):
    tensor = torch.ones(size // 4, dtype=torch.float32)
    for _ in range(2):
        dist.all_reduce(tensor)
    dist.barrier()
    started = time.perf_counter()
    dist.all_reduce(tensor)
    one = time.perf_counter() - started
    # Every rank must run the same number of calls: rank 0 decides from its own first timing.
    iters = torch.tensor([max(3, min(200, int(args.budget / max(one, 1e-6))))])
    dist.broadcast(iters, 0)
    dist.barrier()
    started = time.perf_counter()
    for _ in range(int(iters)):
        dist.all_reduce(tensor)
    seconds = (time.perf_counter() - started) / int(iters)
    if args.rank == 0:
        print("BENCH " + json.dumps({"bytes": size, "seconds": seconds, "iters": int(iters)}), flush=True)
dist.destroy_process_group()
