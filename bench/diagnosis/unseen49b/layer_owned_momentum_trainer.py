"""Classifier trainer with layer-owned optimizer state and loss scaling.

Each rank keeps momentum buffers only for the layers it owns: gradients are
reduced to the owning rank, the owner steps the layer, and the updated weights
are broadcast back from the owner. Loss scaling keeps the step safe from
overflowing gradients.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def build_model():
    return nn.Sequential(nn.Linear(20, 48), nn.Tanh(), nn.Linear(48, 48), nn.Tanh(), nn.Linear(48, 5))


def assign_owners(layers, world):
    return {i: i % world for i in range(len(layers))}


def reduce_to_owners(layers, owners, rank, world):
    for i, layer in enumerate(layers):
        for p in layer.parameters():
            dist.reduce(p.grad, dst=owners[i])
            if owners[i] == rank:
                p.grad.div_(world)
            else:
                p.grad = None


def broadcast_from_owners(layers, owners):
    for i, layer in enumerate(layers):
        for p in layer.parameters():
            dist.broadcast(p.data, src=owners[i])


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = build_model()
    layers = [m for m in model if isinstance(m, nn.Linear)]
    owners = assign_owners(layers, world)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)

    g = torch.Generator().manual_seed(7 + rank)
    w_true = torch.randn(20, 5, generator=torch.Generator().manual_seed(3))
    for step in range(30):
        x = torch.randn(32, 20, generator=g)
        y = (x @ w_true).argmax(dim=1)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=False)
        scaler.scale(loss).backward()
        reduce_to_owners(layers, owners, rank, world)
        scaler.step(opt)
        scaler.update()
        broadcast_from_owners(layers, owners)
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    owned = [i for i, r in owners.items() if r == rank]
    print(f"rank {rank} owned layers {owned}, final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
