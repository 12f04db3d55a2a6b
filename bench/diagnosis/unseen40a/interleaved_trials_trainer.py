import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

TRIALS = [
    {"name": "wd0", "lr": 0.05, "weight_decay": 0.0},
    {"name": "wd1e-3", "lr": 0.05, "weight_decay": 1e-3},
]


class Trial:
    def __init__(self, idx, cfg, group, owner):
        self.idx = idx
        self.cfg = cfg
        self.owner = owner
        torch.manual_seed(100 + idx)
        net = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 4))
        self.model = DDP(net, process_group=group)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg["lr"],
                                     weight_decay=cfg["weight_decay"])
        self.losses = []

    def step(self, xb, yb):
        out = self.model(xb)
        loss = nn.functional.cross_entropy(out, yb)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.losses.append(loss.item())


def batches(rank, n_steps, bs=64):
    g = torch.Generator().manual_seed(rank)
    proj = torch.randn(20, 4, generator=torch.Generator().manual_seed(0))
    for _ in range(n_steps):
        x = torch.randn(bs, 20, generator=g)
        yield x, (x @ proj).argmax(dim=1)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    trials = []
    for i, cfg in enumerate(TRIALS):
        group = dist.new_group(list(range(world)))
        trials.append(Trial(i, cfg, group, owner=i % world))

    home_first = sorted(trials, key=lambda t: (t.owner != rank, t.idx))
    if rank == 0:
        print("trials:", [t.cfg["name"] for t in trials], flush=True)

    for step, (xb, yb) in enumerate(batches(rank, 60)):
        for trial in home_first:
            trial.step(xb, yb)
        if step % 20 == 0:
            own = [t for t in trials if t.owner == rank]
            for t in own:
                print(f"rank {rank} step {step} {t.cfg['name']} loss {t.losses[-1]:.4f}",
                      flush=True)

    summary = torch.tensor([sum(t.losses[-10:]) / 10 for t in trials])
    dist.all_reduce(summary, op=dist.ReduceOp.AVG)
    if rank == 0:
        best = int(summary.argmin())
        print(f"best trial: {TRIALS[best]['name']} ({summary[best]:.4f})", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
