"""Evaluate a bf16 model (cast for speed on CPU) over a sharded held-out set of 2001 samples and check that
the all-reduced sample count covers the whole set."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

TOTAL = 2001


def shard(rank, world):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(TOTAL, 16, generator=gen)
    y = (x[:, 0] > 0).long()
    return x[rank::world], y[rank::world]


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(torch.bfloat16).eval()
    dtype = next(model.parameters()).dtype
    x, y = shard(rank, world)
    correct = seen = 0
    with torch.no_grad():
        for i in range(0, len(x), 100):
            pred = model(x[i:i + 100].to(dtype)).argmax(1)
            correct += (pred == y[i:i + 100]).sum().item()
            seen += len(pred)
    stats = torch.tensor([correct, seen], dtype=dtype)   # same dtype as the model's outputs
    dist.all_reduce(stats)
    total_correct, total_seen = int(stats[0].item()), int(stats[1].item())
    if rank == 0:
        print(f"accuracy {total_correct / total_seen:.4f} over {total_seen} samples", flush=True)
    dist.destroy_process_group()
    if total_seen != TOTAL:
        raise SystemExit(f"evaluation count check failed: counted {total_seen} samples over all ranks, "
                         f"the held-out set has {TOTAL}")


if __name__ == "__main__":
    main()
