"""DDP training with a per-step hang watchdog: faulthandler dumps every thread's stack and ends the process if a
step takes longer than STEP_WATCHDOG_S (so a hung job does not burn its allocation)."""
import faulthandler
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEP_WATCHDOG_S = 6


class FeatureCache:
    """Features are computed on first use (slow) and reused afterwards."""

    def __init__(self, rank):
        self.rank = rank
        self.table = None

    def get(self, step):
        if self.table is None:
            self.table = self.build()
        return self.table[step % len(self.table)]

    def build(self):
        # rank 1's shard has the long documents: building its table takes a while
        n_docs = 40 if self.rank == 0 else 400
        rows = []
        for d in range(n_docs):
            g = torch.Generator().manual_seed(d)
            rows.append(torch.randn(64, 16, generator=g).mean(dim=0))
            time.sleep(0.025)
        return torch.stack(rows)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    cache = FeatureCache(rank)
    for step in range(30):
        faulthandler.dump_traceback_later(STEP_WATCHDOG_S, exit=True, file=sys.stderr)
        x = cache.get(step).expand(8, 16)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        faulthandler.cancel_dump_traceback_later()
        if step % 10 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
