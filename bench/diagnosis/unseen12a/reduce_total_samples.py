"""DDP regression on per-rank shards of different sizes (one file per rank). The number of steps per epoch is
derived from the job's total sample count so that every rank runs the same schedule."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH = 32


def load_shard(rank):
    """This rank's shard: the shards are files of different lengths."""
    g = torch.Generator().manual_seed(100 + rank)
    n = 1000 + 400 * rank
    x = torch.randn(n, 8, generator=g)
    return x, x @ torch.arange(1.0, 9.0) + 0.1 * torch.randn(n, generator=g)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = load_shard(rank)
    total = torch.tensor([len(x)])
    dist.reduce(total, dst=0)  # samples in the whole job
    steps_per_epoch = int(total.item()) // (world * BATCH)
    print(f"rank {rank}: {len(x)} local samples, {steps_per_epoch} steps per epoch", flush=True)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for epoch in range(3):
        for step in range(steps_per_epoch):
            idx = torch.randint(len(x), (BATCH,), generator=g)
            loss = (model(x[idx]).squeeze(1) - y[idx]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        val = loss.detach().clone()
        dist.all_reduce(val)
        if rank == 0:
            print(f"epoch {epoch}: mean loss {val.item() / world:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
