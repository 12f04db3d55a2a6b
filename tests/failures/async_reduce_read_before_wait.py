"""Gradient statistics are all-reduced with async_op=True to overlap the reduction with the next batch's data
preparation; the total is read right after the call, before the work is waited for, so each rank reads its own
(or a half-reduced) sum. The script's check that every rank logged the same global gradient norm then fails.
"""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024))
model(torch.randn(64, 1024)).pow(2).mean().backward()
squares = torch.cat([p.grad.flatten() for p in model.parameters()]).pow(2)
work = dist.all_reduce(squares, async_op=True)
global_norm = squares.sum().sqrt().item()  # the mistake: read before work.wait()
next_batch = torch.randn(64, 1024)  # overlapped with the reduction
work.wait()
norms = [None] * world
dist.all_gather_object(norms, global_norm)
print(f"rank {rank}: global gradient norm {global_norm:.4f}", flush=True)
if max(norms) - min(norms) > 1e-3 * max(norms):
    raise RuntimeError(f"ranks logged different global gradient norms: {norms}")
dist.destroy_process_group()
