"""The launch line passes an option the script does not define: argparse stops every rank at start.

Run it as `... bad_arguments.py --batch_size 64`: the script's option is `--batch-size` (a dash, not an
underscore), so argparse prints its usage and exits 2 before any rank joins the process group.
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()  # the mistake is on the launch line: --batch_size instead of --batch-size
rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
batch = torch.ones(args.batch_size)
dist.all_reduce(batch)
print(f"rank {rank}: {batch.sum().item()}")
dist.destroy_process_group()
