"""Overlaps the metric all_reduce with the next forward pass (async_op=True)."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(rank)
    # per-class confusion counts over a large label space (4M cells)
    confusion = torch.zeros(2048, 2048)
    preds = torch.randint(0, 2048, (50_000,), generator=g)
    labels = torch.randint(0, 2048, (50_000,), generator=g)
    confusion.index_put_((labels, preds), torch.ones(50_000), accumulate=True)
    local_total = confusion.sum().item()
    work = dist.all_reduce(confusion, async_op=True)
    seen = confusion.sum().item()   # overlap: read the totals while the reduce runs
    _ = torch.randn(512, 512) @ torch.randn(512, 512)
    work.wait()
    expected = local_total * world
    print(f"rank {rank}: samples counted {seen:.0f} (expected {expected:.0f})", flush=True)
    if seen != expected:
        raise RuntimeError(f"rank {rank}: evaluation counted {seen:.0f} samples, expected {expected:.0f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
