import os
from collections import OrderedDict
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.model_averaging.hierarchical_model_averager import HierarchicalModelAverager

TOTAL_STEPS = 60
GPUS_PER_SERVER = 4
LOCAL_PERIOD = 4
GLOBAL_PERIOD = 16


def site_batches(site, bs=64):
    g = torch.Generator().manual_seed(site)
    shift = 0.5 * site
    while True:
        x = torch.randn(bs, 20, generator=g) + shift
        y = (x[:, :5].sum(1) > 2.5 * shift).long()
        yield x, y


def build_model():
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    hierarchy = OrderedDict([(LOCAL_PERIOD, GPUS_PER_SERVER), (GLOBAL_PERIOD, world)])
    averager = HierarchicalModelAverager(period_group_size_dict=hierarchy, warmup_steps=8)
    print(f"[rank {rank}] local SGD hierarchy {dict(hierarchy)}", flush=True)

    data = site_batches(rank)
    for step in range(TOTAL_STEPS):
        x, y = next(data)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        averager.average_parameters(model.parameters())
        if step % 10 == 0:
            print(f"[rank {rank}] step {step} loss {loss.item():.4f}", flush=True)

    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    drift = (flat - ref).norm().item()
    print(f"[rank {rank}] final drift from rank 0: {drift:.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
