"""Per-node launcher for the pretraining job: started once on every node, it spawns one worker per slot."""
import argparse
import datetime
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def launcher_args(argv=None):
    p = argparse.ArgumentParser(description="start the pretraining workers of this node")
    p.add_argument("--nnodes", type=int, default=int(os.environ.get("NNODES", "1")))
    p.add_argument("--node-rank", type=int, default=int(os.environ.get("NODE_RANK", "0")))
    p.add_argument("--nproc-per-node", type=int, default=int(os.environ.get("NPROC_PER_NODE", "2")))
    p.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR", "127.0.0.1"))
    p.add_argument("--master-port", type=int, default=int(os.environ.get("MASTER_PORT", "29500")))
    p.add_argument("--steps", type=int, default=200)
    return p.parse_args(argv)


def launch(args):
    procs = []
    for local_rank in range(args.nproc_per_node):
        env = dict(os.environ)
        env.update({
            "MASTER_ADDR": args.master_addr,
            "MASTER_PORT": str(args.master_port),
            "RANK": str(args.node_rank * args.nproc_per_node + local_rank),
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(args.nproc_per_node),
            "LOCAL_WORLD_SIZE": str(args.nproc_per_node),
            "OMP_NUM_THREADS": "1",
        })
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(args.steps)]
        procs.append(subprocess.Popen(cmd, env=env))
    codes = [p.wait() for p in procs]
    print(f"node {args.node_rank}: worker exit codes {codes}", flush=True)
    return max(codes, key=abs)


def worker(steps):
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(256, 32), nn.Flatten(), nn.Linear(32 * 16, 256))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(rank)
    for step in range(steps):
        tokens = torch.randint(0, 256, (8, 17), generator=g)
        logits = model(tokens[:, :16])
        loss = nn.functional.cross_entropy(logits, tokens[:, 16])
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step}: loss {loss.item():.3f} (world {world})", flush=True)
        time.sleep(0.05)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    if "--worker" in sys.argv:
        p = argparse.ArgumentParser()
        p.add_argument("--worker", action="store_true")
        p.add_argument("--steps", type=int, default=200)
        worker(p.parse_args().steps)
    else:
        sys.exit(launch(launcher_args()))
