"""A script started by hand on every node with its node rank as an argument; the same number was given on both
nodes (a copied command line), so two processes claim rank 0."""
import argparse
import datetime
import os

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--node-rank", type=int, required=True)
parser.add_argument("--nnodes", type=int, required=True)
args = parser.parse_args()
dist.init_process_group("gloo", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                        rank=args.node_rank, world_size=args.nnodes,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {args.node_rank}: {t.item()}")
dist.destroy_process_group()
