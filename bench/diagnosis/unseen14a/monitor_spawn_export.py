"""DDP training; rank 0 also runs a small resource monitor in the background (a child process that appends
load and memory figures to a log) and, so that finished helper processes never linger as zombies, tells the
kernel to reap children by itself. At the end every rank writes its predictions with two spawned writer
processes (torch.multiprocessing.spawn), one per half of its shard."""
import os
import signal
import subprocess
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

MONITOR = r"""
import os, sys, time
parent = int(sys.argv[1])
with open(sys.argv[2], "a") as log:
    for _ in range(120):
        if os.getppid() != parent:
            break
        log.write(f"{time.time():.1f} load {os.getloadavg()[0]:.2f}\n"); log.flush()
        time.sleep(0.5)
"""


def start_monitor(path: str) -> subprocess.Popen:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # no zombies from the helper processes
    return subprocess.Popen([sys.executable, "-c", MONITOR, str(os.getpid()), path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def write_predictions(part: int, preds: torch.Tensor, folder: str, rank: int) -> None:
    half = preds.tensor_split(2)[part]
    with open(os.path.join(folder, f"preds-rank{rank}-part{part}.csv"), "w") as out:
        for row in half.tolist():
            out.write(",".join(f"{v:.5f}" for v in row) + "\n")


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    if rank == 0:
        start_monitor("/tmp/monitor.log")

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + rank)
    x, y = torch.randn(512, 16, generator=g), torch.randint(0, 4, (512,), generator=g)
    for epoch in range(5):
        for i in range(0, 512, 64):
            loss = nn.functional.cross_entropy(model(x[i:i + 64]), y[i:i + 64])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"epoch {epoch}: loss {total.item():.4f}", flush=True)

    with torch.no_grad():
        preds = model.module(x).softmax(dim=1)
    dist.barrier()
    dist.destroy_process_group()

    folder = "/tmp/preds"
    os.makedirs(folder, exist_ok=True)
    mp.spawn(write_predictions, args=(preds, folder, rank), nprocs=2, join=True)
    print(f"rank {rank}: predictions written", flush=True)


if __name__ == "__main__":
    main()
