"""Sanity check before a large contrastive (InfoNCE) run: the loss over the whole global batch, computed across
ranks with all_gather, must give the same gradient as the same loss computed in one process on the full batch."""
import copy
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F

LOCAL_BATCH, DIM, TEMP = 16, 32, 0.1


def batch_of(rank):
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(LOCAL_BATCH, DIM, generator=g)
    return x, x + 0.05 * torch.randn(LOCAL_BATCH, DIM, generator=g)  # two views of the same samples


def info_nce(q, k_all, offset):
    logits = F.normalize(q, dim=1) @ F.normalize(k_all, dim=1).T / TEMP
    target = torch.arange(len(q)) + offset
    return F.cross_entropy(logits, target)


def gather_with_local(k):
    """All ranks' keys; our own slot keeps its autograd graph."""
    parts = [torch.zeros_like(k) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, k)
    parts[dist.get_rank()] = k
    return torch.cat(parts)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Linear(DIM, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    reference = copy.deepcopy(encoder)

    # distributed: local queries against the keys of every rank
    x1, x2 = batch_of(rank)
    loss = info_nce(encoder(x1), gather_with_local(encoder(x2)), rank * LOCAL_BATCH)
    loss.backward()
    grads = [p.grad.clone() for p in encoder.parameters()]
    for g in grads:
        dist.all_reduce(g)
        g /= world

    # reference: the same global batch in one process
    views = [batch_of(r) for r in range(world)]
    q_all = reference(torch.cat([v[0] for v in views]))
    k_all = reference(torch.cat([v[1] for v in views]))
    info_nce(q_all, k_all, 0).backward()
    worst = max((g - p.grad).abs().max().item() for g, p in zip(grads, reference.parameters()))
    print(f"rank {rank}: loss {loss.item():.4f}; largest gradient difference from the full-batch loss {worst:.2e}",
          flush=True)
    if worst > 1e-5:
        raise AssertionError(f"distributed InfoNCE gradient differs from the full-batch gradient by {worst:.2e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
