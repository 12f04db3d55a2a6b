"""One trial of a random hyperparameter search: sample a configuration, train an MLP with DDP, report the score."""
import argparse
import datetime
import json
import math
import os
import random

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

SEARCH_SPACE = {
    "width": ("log_int", 32, 512),
    "depth": ("int", 1, 4),
    "lr": ("log_float", 1e-4, 3e-2),
    "dropout": ("float", 0.0, 0.3),
}


class RandomSearch:
    def __init__(self, space, seed=None):
        self.space = space
        self.rng = random.Random(seed)

    def suggest(self):
        trial = {}
        for name, (kind, low, high) in self.space.items():
            if kind == "int":
                trial[name] = self.rng.randint(low, high)
            elif kind == "log_int":
                trial[name] = int(round(math.exp(self.rng.uniform(math.log(low), math.log(high)))))
            elif kind == "log_float":
                trial[name] = math.exp(self.rng.uniform(math.log(low), math.log(high)))
            else:
                trial[name] = self.rng.uniform(low, high)
        return trial


def build_mlp(width, depth, dropout, d_in=20, d_out=4):
    layers, d = [], d_in
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU(), nn.Dropout(dropout)]
        d = width
    layers.append(nn.Linear(d, d_out))
    return nn.Sequential(*layers)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--study", default="mlp-sweep")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    trial = RandomSearch(SEARCH_SPACE, seed=args.seed).suggest()
    if rank == 0:
        print(f"[{args.study}] trial config: {json.dumps(trial)}", flush=True)

    torch.manual_seed(1234)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(4096, 20, generator=g)
    y = (x[:, :4].argmax(dim=1) + (x[:, 4] > 1).long()) % 4
    x, y = x[rank::world], y[rank::world]

    model = DDP(build_mlp(trial["width"], trial["depth"], trial["dropout"]))
    opt = torch.optim.Adam(model.parameters(), lr=trial["lr"])
    loss_fn = nn.CrossEntropyLoss()
    for step in range(args.steps):
        idx = torch.randint(0, len(x), (128,), generator=g)
        opt.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        opt.step()

    model.eval()
    with torch.no_grad():
        correct = torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)
    dist.all_reduce(correct)
    if rank == 0:
        score = (correct[0] / correct[1]).item()
        with open(f"{args.study}-results.jsonl", "a") as f:
            f.write(json.dumps({"trial": trial, "accuracy": score}) + "\n")
        print(f"[{args.study}] accuracy {score:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
