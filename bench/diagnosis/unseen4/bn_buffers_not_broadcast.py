"""DDP with BatchNorm; buffers are not broadcast (broadcast_buffers=False, to save a collective per step).
At the end every rank evaluates its replica on the same held-out batch and the results are compared."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank, world = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 1))
model = DDP(net, broadcast_buffers=False)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
gen = torch.Generator().manual_seed(1000 + rank)
for step in range(30):
    # each rank's shard comes from a different site: its feature scale differs
    x = torch.randn(32, 8, generator=gen) * (1 + rank) + rank
    y = x.sum(1, keepdim=True)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

net.eval()
with torch.no_grad():
    held_out = torch.randn(64, 8, generator=torch.Generator().manual_seed(7))
    pred = net(held_out).mean().reshape(1)
preds = [torch.zeros(1) for _ in range(world)]
dist.all_gather(preds, pred)
print(f"rank {rank}: eval predictions per rank {[round(p.item(), 4) for p in preds]}", flush=True)
if max(p.item() for p in preds) - min(p.item() for p in preds) > 1e-4:
    raise RuntimeError(f"replicas disagree at evaluation: {[p.item() for p in preds]}")
dist.destroy_process_group()
