"""Inference latency benchmark run on every rank of the job: each rank times the same
model at several batch sizes, the per-rank medians are shared, and a summary with the
slowest rank is printed so stragglers can be spotted."""
import datetime
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

BATCH_SIZES = [1, 8, 32]
WARMUP = 3
REPEATS = 15


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(),
                         nn.Linear(512, 10)).eval()


@torch.no_grad()
def time_batch(model, bs):
    x = torch.randn(bs, 256)
    for _ in range(WARMUP):
        model(x)
    samples = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        model(x)
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def share(local, world):
    if world == 1:
        return [local]
    parts = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(parts, local)
    return parts


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)

    model = build_model()
    medians = torch.tensor([time_batch(model, bs) for bs in BATCH_SIZES], dtype=torch.float64)
    print(f"[rank {rank} on {socket.gethostname()}] median ms {medians.tolist()}", flush=True)

    per_rank = share(medians, world)
    slowest = max(per_rank)
    fastest = min(per_rank)
    straggler = per_rank.index(slowest)

    if rank == 0:
        print(f"{'batch':>6} {'fastest ms':>11} {'slowest ms':>11}")
        for i, bs in enumerate(BATCH_SIZES):
            print(f"{bs:>6} {fastest[i].item():>11.3f} {slowest[i].item():>11.3f}")
        tput = [bs / (slowest[i].item() / 1e3) for i, bs in enumerate(BATCH_SIZES)]
        print(f"slowest rank: {straggler}; worst-case samples/s: {[round(t, 1) for t in tput]}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
