"""A DistributedSampler shuffles, but set_epoch() is never called, so each epoch draws the same permutation. The
script keeps each epoch's first indices and checks that the order changed between epochs.
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
dataset = TensorDataset(torch.arange(256))
sampler = DistributedSampler(dataset, shuffle=True)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)
orders = []
for epoch in range(3):  # the mistake: no sampler.set_epoch(epoch) here
    orders.append(torch.cat([batch for (batch,) in loader]).tolist())
    print(f"rank {dist.get_rank()}: epoch {epoch} starts with {orders[-1][:4]}", flush=True)
if orders[0] == orders[1] == orders[2]:
    raise RuntimeError(f"every epoch visited the samples in the same order (starting {orders[0][:4]})")
dist.destroy_process_group()
