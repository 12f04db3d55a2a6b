import json
import os
import socket
import sqlite3
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

CONFIG = {"experiment": "ctr-ranker", "lr": 0.05, "batch_size": 64, "hidden": 32, "steps": 30}


class RunTracker:
    """Small sqlite experiment tracker (same schema as the team's dashboard reads)."""

    def __init__(self, path):
        self.conn = sqlite3.connect(path, timeout=30)
        self.conn.executescript(
            """
            CREATE TABLE IF NOT EXISTS runs (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                name TEXT NOT NULL UNIQUE,
                config TEXT, host TEXT, started REAL, status TEXT);
            CREATE TABLE IF NOT EXISTS metrics (
                run_id INTEGER, step INTEGER, key TEXT, value REAL, rank INTEGER);
            """
        )
        self.conn.commit()
        self.run_id = None

    def start_run(self, name, config):
        cur = self.conn.execute(
            "INSERT INTO runs (name, config, host, started, status) VALUES (?, ?, ?, ?, 'running')",
            (name, json.dumps(config), socket.gethostname(), time.time()),
        )
        self.conn.commit()
        self.run_id = cur.lastrowid

    def log(self, step, rank, **values):
        self.conn.executemany(
            "INSERT INTO metrics VALUES (?, ?, ?, ?, ?)",
            [(self.run_id, step, k, float(v), rank) for k, v in values.items()],
        )
        self.conn.commit()

    def finish(self, status="done"):
        self.conn.execute("UPDATE runs SET status=? WHERE id=?", (status, self.run_id))
        self.conn.commit()
        self.conn.close()


def make_batch(gen, n, dim=16):
    x = torch.randn(n, dim, generator=gen)
    y = (x[:, :4].sum(dim=1, keepdim=True) > 0).float()
    return x, y


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    run_name = "{experiment}-lr{lr}-bs{batch_size}-h{hidden}".format(**CONFIG)
    tracker = RunTracker(os.environ.get("TRACKER_DB", "tracker.sqlite"))
    tracker.start_run(run_name, dict(CONFIG, world_size=world))

    model = nn.Sequential(nn.Linear(16, CONFIG["hidden"]), nn.ReLU(), nn.Linear(CONFIG["hidden"], 1))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=CONFIG["lr"])
    loss_fn = nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(1000 + rank)

    for step in range(CONFIG["steps"]):
        x, y = make_batch(gen, CONFIG["batch_size"])
        loss = loss_fn(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            tracker.log(step, rank, loss=loss.item())

    avg = torch.tensor([loss.item()])
    dist.all_reduce(avg)
    tracker.log(CONFIG["steps"], rank, final_loss=avg.item() / world)
    tracker.finish()
    if rank == 0:
        print(f"run {run_name} finished, mean final loss {avg.item() / world:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
