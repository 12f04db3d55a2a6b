"""Train on a per-rank shard; the global sample count for the epoch's mean loss is cached per local count."""
import functools
import os
from datetime import timedelta

import torch
import torch.distributed as dist


@functools.lru_cache(maxsize=None)
def global_count(local_count: int) -> int:
    """Samples seen by all ranks this epoch (cached: the shard sizes rarely change)."""
    t = torch.tensor([local_count], dtype=torch.int64)
    dist.all_reduce(t)
    return int(t.item())


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    model = torch.nn.Linear(4, 1)
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(rank)
    for epoch in range(4):
        # rank 0 keeps a fixed shard; the other ranks' shards are re-filtered every epoch
        n = 96 if rank == 0 else 80 + 8 * epoch
        x = torch.randn(n, 4, generator=gen)
        loss_sum = model(x).pow(2).sum()
        opt.zero_grad()
        loss_sum.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        total = global_count(n)
        for p in model.parameters():
            p.grad /= total
        opt.step()
        loss = torch.tensor([loss_sum.item()])
        dist.all_reduce(loss)
        print(f"rank {rank} epoch {epoch}: mean loss {loss.item() / total:.4f} over {total} samples", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
