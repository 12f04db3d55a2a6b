"""DDP with broadcast_buffers=False on a model with BatchNorm: the weights stay equal, the running statistics do not.

Each rank's BatchNorm tracks the mean and variance of its own shard, whose scale differs per rank here; evaluation
uses those running statistics, so the replicas disagree on the same validation batch and the script's check raises.
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank = dist.get_rank()
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
model = DistributedDataParallel(net, broadcast_buffers=False)  # the mistake: buffers never leave their rank
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.Generator().manual_seed(10 + rank)
for step in range(10):
    x = torch.randn(32, 8, generator=data) * (1 + 3 * rank)  # each rank's shard has its own scale
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()
model.eval()
with torch.no_grad():
    score = model.module(torch.ones(4, 8)).sum()
scores = [torch.zeros(()) for _ in range(dist.get_world_size())]
dist.all_gather(scores, score)
if not all(torch.allclose(scores[0], other) for other in scores[1:]):
    raise RuntimeError(f"replicas disagree at evaluation: {[round(s.item(), 4) for s in scores]}")
dist.destroy_process_group()
