"""A launcher script that takes the world size as an argument: the command line says 3 on a 2-node job (a copy
of a 3-node command). init_process_group keeps its default 30-minute timeout, so nothing fails: rank 0's store
waits for a third rank until the lab's --timeout stops the run. The stacks show what each process passed."""
import argparse
import os

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--world-size", type=int, required=True)
args = parser.parse_args()
rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
dist.init_process_group("gloo", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                        rank=rank, world_size=args.world_size)  # the mistake: not the world that was launched
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank}: {t.item()}")
dist.destroy_process_group()
