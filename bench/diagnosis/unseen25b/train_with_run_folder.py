"""Train a toy language model; every run gets its own folder, and this process starts its local workers itself.

usage: python train_with_run_folder.py --nnodes 2 --node-rank N --nproc-per-node 2 [--run-name NAME]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--nproc-per-node", type=int, default=2)
    parser.add_argument("--run-name", default=None)
    parser.add_argument("--steps", type=int, default=40)
    return parser.parse_args()


def enter_run_folder(args):
    run_dir = os.environ.get("RUN_DIR")
    if run_dir is None:
        name = args.run_name or time.strftime("lm-%Y%m%d-%H%M%S")
        run_dir = os.path.abspath(os.path.join("outputs", name))
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "args.json"), "w") as f:
            json.dump(vars(args), f, indent=2)
    os.chdir(run_dir)
    return run_dir


def start_local_workers(args, run_dir):
    children = []
    for local_rank in range(1, args.nproc_per_node):
        env = dict(os.environ, LOCAL_RANK=str(local_rank), RUN_DIR=run_dir)
        children.append(subprocess.Popen([sys.executable, sys.argv[0], *sys.argv[1:]], env=env))
    return children


def main():
    args = parse()
    run_dir = enter_run_folder(args)
    children = []
    if "LOCAL_RANK" not in os.environ:
        os.environ["LOCAL_RANK"] = "0"
        children = start_local_workers(args, run_dir)
    local_rank = int(os.environ["LOCAL_RANK"])
    rank = args.node_rank * args.nproc_per_node + local_rank
    world = args.nnodes * args.nproc_per_node

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)

    torch.manual_seed(0)
    vocab, ctx = 100, 16
    data = torch.randint(0, vocab, (512, ctx + 1))[rank::world]
    model = DDP(nn.Sequential(nn.Embedding(vocab, 32), nn.Linear(32, vocab)))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    log = open(f"train_rank{rank}.log", "w")
    for step in range(args.steps):
        batch = data[(step * 8) % len(data):][:8]
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.write(f"{step} {loss.item():.4f}\n")
    log.close()
    if rank == 0:
        torch.save(model.module.state_dict(), "model.pt")
        print(f"run saved in {run_dir}", flush=True)
    dist.destroy_process_group()
    for child in children:
        child.wait()


if __name__ == "__main__":
    main()
