"""Trainer whose data prefetchers are helper processes; after each epoch the main rank stops them with a
process-group kill, the way the original shell-based pipeline did."""
import datetime
import os
import signal
import subprocess
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

PREFETCH = "import time, sys; time.sleep(600)"


def start_prefetchers(n=2):
    return [subprocess.Popen([sys.executable, "-c", PREFETCH]) for _ in range(n)]


def stop_prefetchers(procs):
    """Stop every helper this process started (and anything they started)."""
    os.killpg(os.getpgid(0), signal.SIGTERM)
    for p in procs:
        p.wait()


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        helpers = start_prefetchers() if rank == 0 else []
        for _ in range(15):
            x, y = torch.randn(32, 12), torch.randint(0, 3, (32,))
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if helpers:
            stop_prefetchers(helpers)
        print(f"rank {rank} epoch {epoch} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
