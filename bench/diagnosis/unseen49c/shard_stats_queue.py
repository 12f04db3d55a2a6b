"""Column statistics over a set of row shards, scheduled through a coordinator.

Rank 0 keeps the queue of shards and hands one out whenever a worker asks for
work; workers compute per-shard statistics and report them back with their
next request.  The coordinator writes a summary table at the end.
"""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

NO_RESULT = -1
STOP = -2
N_COLS = 8
SHARD_ROWS = [4000, 300, 500, 2600, 350, 3400, 700, 450, 1800, 600, 2200, 400]


def load_shard(shard_id, rows):
    g = torch.Generator().manual_seed(1000 + shard_id)
    return torch.randn(rows, N_COLS, generator=g) * (shard_id + 1)


def shard_stats(shard_id, rows):
    x = load_shard(shard_id, rows)
    time.sleep(rows * 0.0006)
    return torch.tensor([float(x.shape[0]), x.mean().item(), x.std().item(), x.abs().max().item()])


def coordinator(world):
    queue = list(range(len(SHARD_ROWS)))
    results = []
    msg = torch.zeros(5)
    stopped = 0
    t0 = time.time()
    while stopped < world - 1:
        src = dist.recv(msg)
        if int(msg[0]) != NO_RESULT:
            results.append(msg[1:].clone())
            print(f"[coord] {len(results)}/{len(SHARD_ROWS)} shards done ({time.time() - t0:.1f}s)", flush=True)
        if queue:
            shard_id = queue.pop(0)
            dist.send(torch.tensor([shard_id, SHARD_ROWS[shard_id]]), dst=src)
        else:
            dist.send(torch.tensor([STOP, 0]), dst=src)
            stopped += 1
    return results


def worker(rank):
    task = torch.zeros(2, dtype=torch.long)
    msg = torch.tensor([float(NO_RESULT), 0.0, 0.0, 0.0, 0.0])
    handled = 0
    while True:
        dist.send(msg, dst=0)
        dist.recv(task, src=0)
        shard_id, rows = int(task[0]), int(task[1])
        if shard_id == STOP:
            break
        stats = shard_stats(shard_id, rows)
        msg = torch.cat([torch.tensor([1.0]), stats])
        handled += 1
    print(f"[rank {rank}] handled {handled} shards", flush=True)


def write_summary(results):
    if len(results) != len(SHARD_ROWS):
        raise RuntimeError(f"expected {len(SHARD_ROWS)} shard results, got {len(results)}")
    total_rows = 0
    lines = ["shard,rows,mean,std,absmax"]
    for shard_id, (rows, res) in enumerate(zip(SHARD_ROWS, results)):
        if int(res[0]) != rows:
            raise RuntimeError(
                f"shard {shard_id}: expected {rows} rows, stats report {int(res[0])}; refusing to write summary")
        total_rows += rows
        lines.append(f"{shard_id},{rows},{res[1]:.4f},{res[2]:.4f},{res[3]:.4f}")
    with open("shard_stats.csv", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"[coord] wrote shard_stats.csv: {len(results)} shards, {total_rows} rows", flush=True)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2:
        raise SystemExit("needs a coordinator and at least one worker")
    if rank == 0:
        results = coordinator(world)
        write_summary(results)
    else:
        worker(rank)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
