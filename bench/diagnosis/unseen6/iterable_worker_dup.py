"""Stream training examples from record shards with an IterableDataset (each rank reads its own shards) and
two loader workers per rank; the end-of-epoch check verifies that every record was used exactly once."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset

SHARDS, PER_SHARD = 16, 128


def read_shard(shard):
    g = torch.Generator().manual_seed(shard)
    x = torch.randn(PER_SHARD, 6, generator=g)
    ids = torch.arange(shard * PER_SHARD, (shard + 1) * PER_SHARD)
    return ids, x, x.sum(1)


class ShardStream(IterableDataset):
    def __init__(self, rank, world):
        self.shards = list(range(SHARDS))[rank::world]

    def __iter__(self):
        for shard in self.shards:
            ids, x, y = read_shard(shard)
            for i in range(PER_SHARD):
                yield ids[i], x[i], y[i]


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    loader = DataLoader(ShardStream(rank, world), batch_size=64, num_workers=2)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    counts = torch.zeros(SHARDS * PER_SHARD, dtype=torch.int64)
    for step, (ids, x, y) in enumerate(loader):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x).squeeze(-1), y)
        loss.backward()
        opt.step()
        counts.index_add_(0, ids, torch.ones_like(ids))
        if rank == 0 and step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    dist.all_reduce(counts)
    if rank == 0:
        print(f"epoch done: {int(counts.sum())} records used", flush=True)
    missing, repeated = int((counts == 0).sum()), int((counts > 1).sum())
    if missing or repeated:
        raise RuntimeError(f"epoch used {int(counts.sum())} records for a dataset of {len(counts)}: "
                           f"{missing} never used, {repeated} used more than once")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
