"""Collect every worker's validation loss on worker 0 (two terminals: --rank/--world-size)."""
import argparse
import datetime
import os

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int, required=True)
parser.add_argument("--world-size", type=int, required=True)
args = parser.parse_args()
dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size,
                        timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))

val_loss = torch.tensor([0.5 + 0.1 * args.rank])
losses = [torch.zeros(1) for _ in range(args.world_size)]
dist.gather(val_loss, gather_list=losses, dst=0)
if args.rank == 0:
    print("mean validation loss", torch.cat(losses).mean().item(), flush=True)
dist.destroy_process_group()
