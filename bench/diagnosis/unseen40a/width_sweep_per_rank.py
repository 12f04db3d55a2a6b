import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

SEARCH_SPACE = [
    {"hidden": 64, "depth": 2, "lr": 1e-3},
    {"hidden": 128, "depth": 2, "lr": 1e-3},
    {"hidden": 128, "depth": 3, "lr": 5e-4},
    {"hidden": 256, "depth": 3, "lr": 5e-4},
]


def build_model(hidden, depth, d_in=24, d_out=3):
    layers, width = [], d_in
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), nn.GELU()]
        width = hidden
    layers.append(nn.Linear(width, d_out))
    return nn.Sequential(*layers)


def synthetic_split(seed, n=2048):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 24, generator=g)
    y = (x[:, :3] * torch.tensor([1.0, -2.0, 0.5])).argmax(dim=1)
    return x[: n * 3 // 4], y[: n * 3 // 4], x[n * 3 // 4:], y[n * 3 // 4:]


class Trainer:
    def __init__(self, model, lr):
        if dist.is_initialized() and dist.get_world_size() > 1:
            model = DDP(model)
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=lr)

    def fit(self, x, y, epochs=3, bs=128):
        self.model.train()
        for _ in range(epochs):
            perm = torch.randperm(x.shape[0])
            for i in range(0, x.shape[0], bs):
                idx = perm[i:i + bs]
                loss = nn.functional.cross_entropy(self.model(x[idx]), y[idx])
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

    @torch.no_grad()
    def evaluate(self, x, y):
        self.model.eval()
        return (self.model(x).argmax(dim=1) == y).float().mean().item()


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    my_trials = SEARCH_SPACE[rank::world]
    xtr, ytr, xva, yva = synthetic_split(seed=42)
    results = []
    for cfg in my_trials:
        trainer = Trainer(build_model(cfg["hidden"], cfg["depth"]), cfg["lr"])
        trainer.fit(xtr, ytr)
        acc = trainer.evaluate(xva, yva)
        results.append({**cfg, "val_acc": acc})
        print(f"rank {rank} trial {cfg} acc {acc:.3f}", flush=True)

    gathered = [None] * world
    dist.all_gather_object(gathered, results)
    if rank == 0:
        table = sorted((r for part in gathered for r in part), key=lambda r: -r["val_acc"])
        with open("sweep_results.json", "w") as f:
            json.dump(table, f, indent=2)
        print("best:", table[0], flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
