"""Fine-tune a small intent classifier with DDP; on failure, write a rescue checkpoint before exiting."""
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

N_INTENTS = 12
FEATURES = 48
STEPS = 40
BATCH = 16


def load_shard(rank, world, n=1600, seed=7):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(n, FEATURES, generator=g)
    labels = torch.randint(0, N_INTENTS, (n,), generator=g)
    # rows are appended in collection order; the newest rows use the 2024 intent ids
    newest = torch.arange(n) >= int(n * 0.7)
    labels[newest] = N_INTENTS + labels[newest] % 3
    per = n // world
    return feats[rank * per:(rank + 1) * per], labels[rank * per:(rank + 1) * per]


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, N_INTENTS))

    def forward(self, x):
        return self.net(x)


def save_rescue(model, opt, step, rank):
    dist.barrier()
    if rank == 0:
        torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step}, "rescue.pt")
        print(f"rescue checkpoint written at step {step}", flush=True)


def train(model, opt, feats, labels, rank, world):
    step = 0
    for step in range(STEPS):
        lo = (step * BATCH) % (len(feats) - BATCH)
        x, y = feats[lo:lo + BATCH], labels[lo:lo + BATCH]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0 and rank == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    return step


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "300")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    feats, labels = load_shard(rank, world)
    model = DDP(Classifier())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    started = time.time()
    step = 0
    try:
        step = train(model, opt, feats, labels, rank, world)
    except Exception:
        save_rescue(model, opt, step, rank)
        raise
    if rank == 0:
        torch.save(model.module.state_dict(), "intent_clf.pt")
        with open("metrics.json", "w") as f:
            json.dump({"steps": STEPS, "seconds": round(time.time() - started, 2)}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
