"""Fit a single softmax temperature on held-out logits, split across ranks."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F


def setup():
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    store = dist.HashStore()
    store.set_timeout(timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    return rank, world


def load_val_logits(rank, world, n_total=4096, n_classes=10):
    g = torch.Generator().manual_seed(7)
    labels = torch.randint(0, n_classes, (n_total,), generator=g)
    logits = torch.randn(n_total, n_classes, generator=g)
    logits[torch.arange(n_total), labels] += 2.5
    logits = logits * 3.0
    lo, hi = rank * n_total // world, (rank + 1) * n_total // world
    return logits[lo:hi], labels[lo:hi]


def global_nll_and_grad(log_t, logits, labels, n_global):
    log_t = log_t.detach().requires_grad_(True)
    loss = F.cross_entropy(logits / log_t.exp(), labels, reduction="sum") / n_global
    loss.backward()
    packed = torch.stack([loss.detach(), log_t.grad.detach()])
    dist.all_reduce(packed)
    return packed[0].item(), packed[1]


def main():
    rank, world = setup()
    logits, labels = load_val_logits(rank, world)
    n = torch.tensor([labels.numel()], dtype=torch.int64)
    dist.all_reduce(n)
    n_global = int(n.item())

    log_t = torch.zeros(())
    lr = 0.5
    for step in range(60):
        nll, grad = global_nll_and_grad(log_t, logits, labels, n_global)
        log_t = log_t - lr * grad
        if rank == 0 and step % 10 == 0:
            print(f"step {step:3d} nll={nll:.4f} T={log_t.exp().item():.3f}", flush=True)

    if rank == 0:
        print(f"fitted temperature: {log_t.exp().item():.4f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
