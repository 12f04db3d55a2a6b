import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

GRID = [
    {"name": "lr3e-2_e3", "lr": 3e-2, "epochs": 3},
    {"name": "lr1e-2_e6", "lr": 1e-2, "epochs": 6},
]
STEPS_PER_EPOCH = 20


def make_data(seed, n=512, d=16):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, 1, generator=g)
    y = x @ w + 0.1 * torch.randn(n, 1, generator=g)
    return x, y


class MetricLogger:
    def __init__(self, group, trial_name):
        self.group = group
        self.trial = trial_name
        self.world = dist.get_world_size(group)
        self.history = []

    def log(self, epoch, loss_sum, count):
        t = torch.tensor([loss_sum, float(count)])
        dist.all_reduce(t)
        mean = (t[0] / t[1]).item()
        self.history.append({"epoch": epoch, "loss": mean})
        if dist.get_rank(self.group) == 0:
            print(f"[{self.trial}] epoch {epoch} loss {mean:.4f}", flush=True)


def run_trial(cfg, group, group_rank, group_size):
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    ddp = DDP(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=cfg["lr"])
    x, y = make_data(7 + group_rank)
    logger = MetricLogger(group, cfg["name"])
    bs = 32
    for epoch in range(cfg["epochs"]):
        loss_sum, count = 0.0, 0
        for step in range(STEPS_PER_EPOCH):
            i = (step * bs) % x.shape[0]
            xb, yb = x[i:i + bs], y[i:i + bs]
            loss = nn.functional.mse_loss(ddp(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += loss.item() * xb.shape[0]
            count += xb.shape[0]
        logger.log(epoch, loss_sum, count)
    return logger.history[-1]["loss"]


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    world = dist.get_world_size()
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    n_trials = world // per_node

    groups = [dist.new_group(list(range(t * per_node, (t + 1) * per_node)))
              for t in range(n_trials)]
    trial_idx = rank // per_node
    cfg = GRID[trial_idx % len(GRID)]
    group = groups[trial_idx]

    t0 = time.time()
    final = run_trial(cfg, group, dist.get_rank(group), per_node)
    result = {"trial": cfg["name"], "rank": rank, "final_loss": final,
              "seconds": round(time.time() - t0, 2)}

    results = [None] * world
    dist.all_gather_object(results, result)
    if rank == 0:
        best = {}
        for r in results:
            best.setdefault(r["trial"], r["final_loss"])
        print(json.dumps({"trials": best, "best": min(best, key=best.get)}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
