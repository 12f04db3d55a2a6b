"""Intent classifier trained with DDP on a labelled corpus split in one shard per rank."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES = 24
SAMPLES = 4000


def build_corpus():
    """The whole labelled corpus, in file order: the rare intents (8 and 9) were collected first."""
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 8, (SAMPLES,), generator=g)
    labels[:40] = 8
    labels[40:55] = 9
    x = torch.randn(SAMPLES, FEATURES, generator=g) + labels.unsqueeze(1).float() * 0.1
    return x, labels


def load_my_shard(rank, world):
    x, labels = build_corpus()
    per_rank = SAMPLES // world
    return x[rank * per_rank:(rank + 1) * per_rank], labels[rank * per_rank:(rank + 1) * per_rank]


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = load_my_shard(rank, world)
    num_classes = int(y.max()) + 1
    print(f"rank {rank}: {len(y)} samples, {num_classes} intents", flush=True)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, num_classes)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        for i in range(0, len(y), 100):
            loss = F.cross_entropy(model(x[i:i + 100]), y[i:i + 100])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "intents.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
