"""Tabular classifier: 1200 labelled rows, 1000 for training and 200 held out for validation.

Training adds a little feature noise; after the first epoch a data audit checks that the epoch covered the
training rows once and no validation row.

Launch: torchrun --nnodes 2 --nproc-per-node 2 ... random_split_unseeded.py
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, random_split

SEED = 1234


def make_rows(n=1200):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, :4].sum(1) > 0).long()
    ids = torch.arange(n)
    return TensorDataset(x, y, ids)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(SEED + rank)

    rows = make_rows()
    train_set, val_set = random_split(rows, [1000, 200])
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=SEED)
    loader = DataLoader(train_set, batch_size=25, sampler=sampler)

    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(2):
        sampler.set_epoch(epoch)
        seen = []
        for x, y, ids in loader:
            x = x + 0.05 * torch.randn_like(x)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += ids.tolist()
        if epoch == 0:
            everyone = [None] * world
            dist.all_gather_object(everyone, (seen, [int(rows[i][2]) for i in val_set.indices]))
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.3f}", flush=True)

    trained = set(i for ids, _ in everyone for i in ids)
    held_out = set(everyone[0][1])
    leaked = trained & held_out
    dist.barrier()
    dist.destroy_process_group()
    if len(trained) != len(train_set) or leaked:
        print(f"rank {rank}: data audit failed: epoch 0 trained on {len(trained)} distinct rows "
              f"(expected {len(train_set)}); {len(leaked)} of them are in the validation rows", flush=True)
        raise SystemExit(1)
    print(f"rank {rank}: data audit ok", flush=True)


if __name__ == "__main__":
    main()
