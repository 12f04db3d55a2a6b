import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class SpikeGuard:
    """Skip updates whose loss jumps far above the running average."""

    def __init__(self, factor=4.0, warmup=10, beta=0.95):
        self.factor, self.warmup, self.beta = factor, warmup, beta
        self.ema, self.count, self.skipped = None, 0, 0

    def is_spike(self, value):
        self.count += 1
        if self.ema is None:
            self.ema = value
            return False
        spike = self.count > self.warmup and value > self.factor * self.ema
        if spike:
            self.skipped += 1
        else:
            self.ema = self.beta * self.ema + (1 - self.beta) * value
        return spike


def load_records(n=4096, d=24):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, d, generator=g)
    y = (x[:, :4].sum(dim=1, keepdim=True) > 0).float()
    # a late export batch came in with raw (unscaled) sensor values and inverted polarity
    x[3100:3140] *= -40.0
    return x, y


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    x, y = load_records()
    per = x.shape[0] // world
    x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]

    model = DDP(nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    guard = SpikeGuard()
    batch = 16

    for epoch in range(2):
        for i in range(0, per, batch):
            xb, yb = x[i:i + batch], y[i:i + batch]
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.binary_cross_entropy_with_logits(model(xb), yb)
            if guard.is_spike(loss.item()):
                print(f"[rank {rank}] epoch {epoch} batch {i // batch}: loss spike {loss.item():.2f}, skipping", flush=True)
                continue
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        print(f"[rank {rank}] epoch {epoch} done, skipped {guard.skipped}", flush=True)

    stats = torch.tensor([loss.item(), float(guard.skipped)])
    dist.all_reduce(stats)
    if rank == 0:
        print(f"mean final loss {stats[0].item() / world:.4f}, skipped batches {int(stats[1])}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
