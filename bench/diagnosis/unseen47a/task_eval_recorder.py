import os
import time
import sqlite3
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

NUM_TASKS = 3
DIM = 32
CLASSES = 4
TRAIN_N = 512
EVAL_N = 4096
BOOTSTRAP = 400
DB_PATH = "task_eval.db"


def make_task(t, n, split):
    g = torch.Generator().manual_seed(10 * t + split)
    proj = torch.randn(DIM, CLASSES, generator=torch.Generator().manual_seed(t))
    x = torch.randn(n, DIM, generator=g)
    return x, (x @ proj).argmax(1)


def open_db():
    conn = sqlite3.connect(DB_PATH)
    conn.execute("CREATE TABLE IF NOT EXISTS results (run TEXT, after_task INT, eval_task INT, "
                 "rank INT, acc REAL, lo REAL, hi REAL, ts REAL)")
    conn.commit()
    return conn


@torch.no_grad()
def bootstrap_acc(model, x, y, gen):
    hits = (model(x).argmax(1) == y).float()
    idx = torch.randint(0, hits.numel(), (BOOTSTRAP, hits.numel()), generator=gen)
    boots = hits[idx].mean(1).sort().values
    return hits.mean().item(), boots[int(0.025 * BOOTSTRAP)].item(), boots[int(0.975 * BOOTSTRAP)].item()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    run = os.environ.get("RUN_NAME", "cl-baseline")

    model = nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=2e-3)
    conn = open_db()
    gen = torch.Generator().manual_seed(rank)

    for task in range(NUM_TASKS):
        x, y = make_task(task, TRAIN_N, 0)
        x, y = x[rank::world], y[rank::world]
        for epoch in range(5):
            for i in range(0, x.size(0), 32):
                loss = F.cross_entropy(ddp(x[i:i + 32]), y[i:i + 32])
                opt.zero_grad()
                loss.backward()
                opt.step()

        dist.barrier()
        t0 = time.time()
        for seen in range(task + 1):
            ex, ey = make_task(seen, EVAL_N, 1)
            acc, lo, hi = bootstrap_acc(model, ex[rank::world], ey[rank::world], gen)
            conn.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (run, task, seen, rank, acc, lo, hi, time.time()))
        if rank == 0:
            print(f"task {task}: evaluated {task + 1} tasks in {time.time() - t0:.1f}s", flush=True)

    conn.commit()
    rows = conn.execute("SELECT COUNT(*) FROM results WHERE run = ?", (run,)).fetchone()[0]
    print(f"rank {rank}: {rows} result rows in {DB_PATH}", flush=True)
    conn.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
