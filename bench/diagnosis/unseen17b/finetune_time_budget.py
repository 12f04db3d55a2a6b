"""Fine-tune a small regression head under a wall-clock budget (the cluster gives us fixed-length slots, so the
job stops itself and leaves time to save)."""
import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

BUDGET_S = float(os.environ.get("TRAIN_BUDGET_S", "12"))
MAX_STEPS = 100_000
BATCH = 64
FEATURES = 48


class Deadline:
    def __init__(self, seconds):
        self.seconds = seconds
        self.start = time.monotonic()

    def elapsed(self):
        return time.monotonic() - self.start

    def expired(self):
        return self.elapsed() >= self.seconds


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    w = torch.linspace(-1, 1, FEATURES)
    y = (x @ w).unsqueeze(1) + 0.1 * torch.randn(n, 1, generator=g)
    return x, y


def build_model():
    return nn.Sequential(nn.Linear(FEATURES, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 1))


@torch.no_grad()
def evaluate(model, x, y, repeats=1):
    model.eval()
    total = 0.0
    for _ in range(repeats):
        for i in range(0, len(x), 512):
            total += nn.functional.mse_loss(model(x[i:i + 512]), y[i:i + 512], reduction="sum").item()
    model.train()
    return total / (len(x) * repeats)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = build_model()
    train_x, train_y = make_split(20_000, seed=100 + rank)

    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    if rank == 0:
        val_x, val_y = make_split(100_000, seed=7)
        print(f"baseline val mse {evaluate(model, val_x, val_y, repeats=3):.4f}", flush=True)

    deadline = Deadline(BUDGET_S)
    step = 0
    while step < MAX_STEPS:
        idx = torch.randint(0, len(train_x), (BATCH,))
        loss = nn.functional.mse_loss(ddp(train_x[idx]), train_y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % 200 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.4f} ({deadline.elapsed():.1f}s)", flush=True)
        if deadline.expired():
            break

    print(f"rank {rank}: budget reached after {step} steps", flush=True)
    stats = torch.tensor([float(step), loss.item()])
    dist.all_reduce(stats)
    if rank == 0:
        print(f"mean final loss {stats[1].item() / world:.4f}", flush=True)
        print(f"final val mse {evaluate(model, val_x, val_y):.4f}", flush=True)
        torch.save(model.state_dict(), "head.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
