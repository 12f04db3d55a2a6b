import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

TASKS = ["ner", "pos", "chunk"]
RECORDS_PER_TASK = 48
TEMPERATURE = 2.0
EPOCHS = 4


def setup():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def build_manifest():
    g = torch.Generator().manual_seed(7)
    rows = []
    for t_id, _ in enumerate(TASKS):
        for _ in range(RECORDS_PER_TASK):
            rows.append((t_id, torch.randn(12, generator=g), int(torch.randint(0, 4, (1,), generator=g))))
    return rows


def my_slice(rows, rank, world):
    per = len(rows) // world
    return rows[rank * per:(rank + 1) * per]


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, 24), nn.Tanh())
        self.heads = nn.ModuleList([nn.Linear(24, 4) for _ in TASKS])

    def forward(self, x, t_ids):
        h = self.body(x)
        outs = torch.stack([head(h) for head in self.heads], dim=1)
        return outs[torch.arange(len(t_ids)), t_ids]


def task_weights(history):
    if len(history) < 2:
        return torch.ones(len(TASKS)) / len(TASKS)
    ratio = history[-1] / history[-2]
    return torch.softmax(ratio / TEMPERATURE, dim=0)


def main():
    rank, world = setup()
    torch.manual_seed(0)
    rows = my_slice(build_manifest(), rank, world)
    model = DDP(Tagger())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    history = []
    sampler_gen = torch.Generator().manual_seed(123)

    for epoch in range(EPOCHS):
        weights = task_weights(history)
        draws = torch.multinomial(weights, num_samples=len(rows), replacement=True, generator=sampler_gen)
        sum_loss = torch.zeros(len(TASKS))
        count = torch.zeros(len(TASKS))
        for i in range(0, len(rows), 8):
            chunk = rows[i:i + 8]
            t_ids = torch.tensor([r[0] for r in chunk])
            x = torch.stack([r[1] for r in chunk])
            y = torch.tensor([r[2] for r in chunk])
            scale = weights[draws[i:i + len(chunk)]] * len(TASKS)
            logits = model(x, t_ids)
            per_item = F.cross_entropy(logits, y, reduction="none")
            loss = (per_item * scale).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sum_loss.index_add_(0, t_ids, per_item.detach())
            count.index_add_(0, t_ids, torch.ones(len(chunk)))
        history.append(sum_loss / count)
        if rank == 0:
            print(f"epoch {epoch} weights {[round(w, 3) for w in weights.tolist()]}", flush=True)

    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
