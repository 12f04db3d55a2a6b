"""Score a long series in shards: every worker rank scores its range and reports it to rank 0, which assembles
the per-shard table and checks that the shards cover the series without gaps."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

ROWS = 192_000


def shard_bounds(rank, world):
    # the coordinator keeps a small head; the workers get decreasing ranges (the tail is sparse)
    weights = [1] + list(range(world - 1, 0, -1))
    total = sum(weights)
    edges = [0]
    for w in weights:
        edges.append(edges[-1] + ROWS * w // total)
    edges[-1] = ROWS
    return edges[rank], edges[rank + 1]


def score(start, end):
    g = torch.Generator().manual_seed(start)
    w = torch.randn(64, 64, generator=g)
    total = 0.0
    for row in range(start, end, 10):
        x = torch.randn(10, 64, generator=g)
        for _ in range(20):
            x = torch.tanh(x @ w)
        total += x.sum().item()
    return total


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    start, end = shard_bounds(rank, world)
    t0 = time.time()
    mine = torch.tensor([float(start), float(end), score(start, end)], dtype=torch.float64)
    print(f"rank {rank}: scored rows {start}..{end} in {time.time() - t0:.1f}s", flush=True)
    if rank != 0:
        dist.send(mine, dst=0)
    else:
        table = {0: mine.tolist()}
        buf = torch.zeros(3, dtype=torch.float64)
        for src in range(1, world):
            dist.recv(buf)
            table[src] = buf.tolist()
        for src in range(1, world):
            if table[src][0] != table[src - 1][1]:
                print(f"shard table has a gap or overlap: shard {src - 1} ends at row {table[src - 1][1]:.0f}, "
                      f"shard {src} starts at row {table[src][0]:.0f}", file=sys.stderr, flush=True)
                sys.exit(1)
        print(f"total score {sum(v[2] for v in table.values()):.2f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
