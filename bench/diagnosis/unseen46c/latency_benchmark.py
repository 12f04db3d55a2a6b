"""Batch-inference latency benchmark: each rank serves its share of a request set in
fixed-size batches and reports p50/p90/p99 batch latency plus throughput; rank 0 prints
the cluster table."""
import argparse
import datetime
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def build_model(dim):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)).eval()


def make_requests(n, dim):
    g = torch.Generator().manual_seed(3)
    return [torch.randn(dim, generator=g) for _ in range(n)]


def serve(model, reqs, batch_size, warmup=1):
    with torch.inference_mode():
        for _ in range(warmup):
            model(torch.stack(reqs[:batch_size]))
        lat = []
        for i in range(0, len(reqs), batch_size):
            x = torch.stack(reqs[i:i + batch_size])
            t = time.perf_counter()
            model(x)
            lat.append((time.perf_counter() - t) * 1e3)
    return lat


def summarize(lat_ms, n_req):
    cuts = statistics.quantiles(lat_ms, n=100, method="inclusive")
    return {"batches": len(lat_ms), "requests": n_req, "p50_ms": round(cuts[49], 3),
            "p90_ms": round(cuts[89], 3), "p99_ms": round(cuts[98], 3),
            "total_ms": round(sum(lat_ms), 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--dim", type=int, default=256)
    args = ap.parse_args()

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    model = build_model(args.dim)
    reqs = make_requests(args.requests, args.dim)
    per = -(-len(reqs) // world)
    mine = reqs[rank * per:(rank + 1) * per]

    lat = serve(model, mine, args.batch_size)
    summary = summarize(lat, len(mine))
    summary["rank"] = rank

    table = [None] * world
    dist.all_gather_object(table, summary)
    if rank == 0:
        total_req = sum(s["requests"] for s in table)
        wall = max(s["total_ms"] for s in table) / 1e3
        for s in table:
            print(json.dumps(s))
        print(json.dumps({"world": world, "throughput_req_s": round(total_req / wall, 1)}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
