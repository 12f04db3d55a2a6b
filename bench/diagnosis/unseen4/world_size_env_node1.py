"""Two-terminal script (--rank/--world-size); the environment's WORLD_SIZE wins when a scheduler sets it."""
import argparse
import datetime
import os

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int, required=True)
parser.add_argument("--world-size", type=int, required=True)
args = parser.parse_args()
world_size = int(os.environ.get("WORLD_SIZE", args.world_size))  # schedulers export WORLD_SIZE
dist.init_process_group("gloo", rank=args.rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
t = torch.ones(3)
dist.all_reduce(t)
print(f"rank {args.rank}: {t.tolist()}", flush=True)
dist.destroy_process_group()
