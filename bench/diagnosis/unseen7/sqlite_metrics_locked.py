"""Every rank records its per-step metrics in one SQLite database on the shared folder (runs.db), committed once
per epoch to keep the write overhead low."""
import os
import sqlite3
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class MetricsDB:
    def __init__(self, path, rank):
        self.rank = rank
        self.conn = sqlite3.connect(path, timeout=5.0)
        self.conn.execute("CREATE TABLE IF NOT EXISTS metrics (rank INT, epoch INT, step INT, loss REAL, t REAL)")
        self.conn.commit()

    def log(self, epoch, step, loss):
        self.conn.execute("INSERT INTO metrics VALUES (?, ?, ?, ?, ?)", (self.rank, epoch, step, loss, time.time()))

    def end_epoch(self):
        self.conn.commit()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    if rank == 0:
        MetricsDB("runs.db", rank)          # create the table once
    dist.barrier()
    db = MetricsDB("runs.db", rank)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    for epoch in range(3):
        for step in range(40):
            x = torch.randn(64, 32, generator=g)
            loss = nn.functional.mse_loss(model(x), x[:, :5].sum(dim=1, keepdim=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
            db.log(epoch, step, loss.item())
            time.sleep(0.2)          # the rest of a real step (augmentation, logging)
        db.end_epoch()
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
