import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

ROUNDS = 4
STEPS_PER_ROUND = 20
SEARCH_SPACE = {
    "lr": [3e-3, 1e-2, 3e-2],
    "hidden": [32, 64, 128],
    "dropout": [0.0, 0.1],
}


def member_config(member):
    rng = random.Random(1000 + member)
    return {k: rng.choice(v) for k, v in SEARCH_SPACE.items()}


def make_model(cfg):
    return nn.Sequential(
        nn.Linear(16, cfg["hidden"]), nn.ReLU(), nn.Dropout(cfg["dropout"]),
        nn.Linear(cfg["hidden"], 4),
    )


def make_data(seed, n=512):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    w = torch.randn(16, 4, generator=torch.Generator().manual_seed(7))
    y = (x @ w).argmax(1)
    return x, y


def train_round(model, opt, x, y):
    model.train()
    for i in range(STEPS_PER_ROUND):
        idx = slice((i * 32) % len(x), (i * 32) % len(x) + 32)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()


@torch.no_grad()
def evaluate(model, x, y):
    model.eval()
    return (model(x).argmax(1) == y).float().mean().item()


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    cfg = member_config(rank)
    print(f"[member {rank}] config {cfg}", flush=True)
    model = make_model(cfg)
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=0.9)
    x, y = make_data(100 + rank)
    vx, vy = make_data(999)

    for rnd in range(ROUNDS):
        train_round(model, opt, x, y)
        acc = evaluate(model, vx, vy)
        scores = [None] * world
        dist.all_gather_object(scores, acc)
        order = sorted(range(world), key=lambda r: scores[r])
        n_cut = max(1, world // 4)
        losers, winners = order[:n_cut], order[-n_cut:]
        print(f"[member {rank}] round {rnd} acc {acc:.3f} losers {losers} winners {winners}", flush=True)
        for loser, winner in zip(losers, winners):
            payload = [{"model": model.state_dict(), "cfg": cfg}] if rank == winner else [None]
            dist.broadcast_object_list(payload, src=winner)
            if rank == loser:
                donor = payload[0]
                model.load_state_dict(donor["model"])
                cfg = dict(donor["cfg"])
                cfg["lr"] *= random.choice([0.8, 1.2])
                opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=0.9)
                print(f"[member {rank}] exploited member {winner}", flush=True)
        dist.barrier()

    best = max(range(world), key=lambda r: scores[r])
    if rank == 0:
        print(f"best member {best} acc {scores[best]:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
