"""Per-epoch predictions written by every worker, merged by worker 0 once all of them have written theirs.

Started by hand on each machine:  python store_barrier_key_reused.py --rank R --world-size N
A small key-value store on MASTER_PORT+1 tells worker 0 when every worker's file is on the shared disk.
"""
import argparse
import datetime
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def wait_for_all(store, key, world_size, timeout_s):
    store.add(key, 1)
    deadline = time.monotonic() + timeout_s
    while store.add(key, 0) != world_size:
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s:.0f} s at '{key}' for {world_size} workers; "
                               f"the counter reads {store.add(key, 0)}")
        time.sleep(0.2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    timeout_s = float(os.environ.get("PG_TIMEOUT", "10"))
    timeout = datetime.timedelta(seconds=timeout_s)
    dist.init_process_group("gloo", init_method="env://", rank=args.rank, world_size=args.world_size,
                            timeout=timeout)
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1, args.world_size,
                          is_master=(args.rank == 0), timeout=timeout)
    out = Path("predictions")
    out.mkdir(exist_ok=True)

    torch.manual_seed(0)
    model = nn.Linear(10, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(args.rank)
    for epoch in range(args.epochs):
        for _ in range(10):
            x = torch.randn(32, 10, generator=g)
            y = (x[:, 0] > 0).long()
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
            opt.step()
        with torch.no_grad():
            preds = model(torch.randn(100, 10, generator=g)).argmax(1)
        torch.save(preds, out / f"epoch{epoch}-worker{args.rank}.pt")
        wait_for_all(store, "predictions_written", args.world_size, timeout_s)
        if args.rank == 0:
            merged = torch.cat([torch.load(out / f"epoch{epoch}-worker{r}.pt") for r in range(args.world_size)])
            print(f"epoch {epoch}: loss {loss.item():.4f}, merged {len(merged)} predictions", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
