"""Distil from cached teacher logits.

Stage 1 scores the local shard with the teacher once and keeps the tempered logits in
memory; stage 2 trains the student against the cache for a few epochs.
"""
import os
import argparse
import datetime

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description="cached-logit distillation")
    p.add_argument("--local_rank", type=int, required=True,
                   help="process index on this machine (set by the launcher)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--temperature", type=float, default=2.0)
    p.add_argument("--alpha", type=float, default=0.8)
    p.add_argument("--shard-size", type=int, default=128)
    return p.parse_args()


def build_teacher():
    torch.manual_seed(7)
    t = nn.Sequential(nn.Linear(20, 96), nn.GELU(), nn.Linear(96, 5))
    return t.eval().requires_grad_(False)


def build_student():
    torch.manual_seed(8)
    return nn.Sequential(nn.Linear(20, 16), nn.GELU(), nn.Linear(16, 5))


def shard(rank, n):
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(n, 20, generator=g)
    y = (x[:, :5].argmax(dim=1)).long()
    return x, y


@torch.no_grad()
def cache_teacher_logits(teacher, x, bs=32):
    return torch.cat([teacher(x[i:i + bs]) for i in range(0, len(x), bs)])


def main():
    args = parse_args()
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()

    x, y = shard(rank, args.shard_size)
    cache = cache_teacher_logits(build_teacher(), x)

    student = DDP(build_student())
    opt = torch.optim.AdamW(student.parameters(), lr=1e-2)
    T = args.temperature
    for epoch in range(args.epochs):
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
        for i in range(0, len(x), 32):
            idx = perm[i:i + 32]
            s = student(x[idx])
            kd = F.kl_div(F.log_softmax(s / T, -1), F.softmax(cache[idx] / T, -1),
                          reduction="batchmean") * T * T
            loss = args.alpha * kd + (1 - args.alpha) * F.cross_entropy(s, y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f} (local_rank {args.local_rank})", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
