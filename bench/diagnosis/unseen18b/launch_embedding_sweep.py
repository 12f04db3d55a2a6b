"""One-file launcher + worker: start torchrun on this node, then train an embedding model per sweep point.

Run it once per node (same command everywhere):  python launch_embedding_sweep.py
"""
import argparse
import datetime
import os
import socket
import sys
import uuid

import torch
import torch.distributed as dist
import torch.nn as nn


def launch(args):
    from torch.distributed.run import main as torchrun_main

    nnodes = os.environ.get("NNODES", "2")
    endpoint = f"{os.environ.get('MASTER_ADDR', 'node0')}:{os.environ.get('MASTER_PORT', '29500')}"
    run_id = f"embsweep-{uuid.uuid4().hex[:8]}"
    print(f"[{socket.gethostname()}] launching {nnodes} nodes x {args.nproc}, rendezvous {endpoint} id {run_id}",
          flush=True)
    torchrun_main([
        "--nnodes", nnodes,
        "--nproc-per-node", str(args.nproc),
        "--rdzv-backend", "c10d",
        "--rdzv-endpoint", endpoint,
        "--rdzv-id", run_id,
        "--rdzv-conf", "join_timeout=60",
        "--max-restarts", "0",
        os.path.abspath(__file__), "--worker", "--dims", args.dims,
    ])


def worker(args):
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(rank)
    pairs = torch.randint(0, 500, (2048, 2), generator=g)
    results = {}
    for dim in [int(d) for d in args.dims.split(",")]:
        torch.manual_seed(dim)
        emb = nn.Embedding(500, dim)
        opt = torch.optim.SGD(emb.parameters(), lr=0.5)
        for step in range(20):
            a, b = pairs[step * 64:(step + 1) * 64].T
            loss = (1 - nn.functional.cosine_similarity(emb(a), emb(b))).mean()
            opt.zero_grad()
            loss.backward()
            for p in emb.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
            opt.step()
        stat = loss.detach().clone()
        dist.all_reduce(stat, op=dist.ReduceOp.AVG)
        results[dim] = stat.item()
    if rank == 0:
        print("sweep:", {d: round(v, 4) for d, v in results.items()}, flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--nproc", type=int, default=1)
    p.add_argument("--dims", default="16,32,64")
    args = p.parse_args()
    if args.worker:
        worker(args)
    else:
        launch(args)


if __name__ == "__main__":
    sys.exit(main())
