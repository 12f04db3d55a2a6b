import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

NUM_USERS = 2000
NUM_ITEMS = 5000
INTERACTIONS = 6000
NEGATIVES = 400
DIM = 32
STEPS = 20


def interaction_log():
    rng = np.random.default_rng(7)
    users = rng.integers(0, NUM_USERS, INTERACTIONS)
    items = np.minimum(rng.zipf(1.3, INTERACTIONS) - 1, NUM_ITEMS - 1)
    return users, items


class TwoTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.Embedding(NUM_USERS, DIM)
        self.item = nn.Embedding(NUM_ITEMS, DIM)

    def forward(self, users, pos, neg):
        u = F.normalize(self.user(users), dim=1)
        p = F.normalize(self.item(pos), dim=1)
        n = F.normalize(self.item(neg), dim=1)
        logits = torch.cat([(u * p).sum(1, keepdim=True), u @ n.T], dim=1) / 0.1
        return F.cross_entropy(logits, torch.zeros(len(users), dtype=torch.long))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    users, items = interaction_log()
    mine = users % world == rank
    users, items = users[mine], items[mine]

    counts = np.bincount(items, minlength=NUM_ITEMS).astype(np.float64)
    pop = counts ** 0.75
    pop /= pop.sum()

    model = nn.parallel.DistributedDataParallel(TwoTower())
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    rng = np.random.default_rng(100 + rank)
    for step in range(STEPS):
        idx = rng.integers(0, len(users), 256)
        neg = rng.choice(NUM_ITEMS, size=NEGATIVES, replace=False, p=pop)
        loss = model(torch.from_numpy(users[idx]), torch.from_numpy(items[idx]), torch.from_numpy(neg))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} sampled-softmax loss {loss.item():.4f}")
    if rank == 0:
        torch.save(model.module.state_dict(), "two_tower_pretrain.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
