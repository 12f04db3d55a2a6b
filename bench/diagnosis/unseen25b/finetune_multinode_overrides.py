"""Launcher-free multi-node fine-tuning: start it once per node; trailing key=value pairs override the config.

usage: python finetune_multinode_overrides.py --nnodes 2 --node-rank N [lr=3e-4 epochs=3 ...]
"""
import argparse
import ast
import datetime
import os
import socket

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

DEFAULTS = {"lr": 1e-3, "epochs": 2, "batch_size": 32, "hidden": 64, "log_every": 10}


def apply_overrides(config, tokens):
    config = dict(config)
    for token in tokens:
        if "=" not in token:
            continue
        key, raw = token.split("=", 1)
        key = key.lstrip("-").replace("-", "_")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        config[key] = value
    return config


def parse():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node_rank", type=int, default=0)
    parser.add_argument("--nproc_per_node", type=int, default=1)
    args, rest = parser.parse_known_args()
    return args, apply_overrides(DEFAULTS, rest)


def main():
    args, cfg = parse()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    rank = args.node_rank * args.nproc_per_node + local_rank
    world = args.nnodes * args.nproc_per_node
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    print(f"{socket.gethostname()}: starting rank {rank}/{world} with {cfg}", flush=True)

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world, timeout=timeout)

    torch.manual_seed(0)
    x = torch.randn(1024, 32)
    y = x[:, :8].sum(dim=1, keepdim=True)
    x, y = x[rank::world], y[rank::world]
    model = DDP(nn.Sequential(nn.Linear(32, cfg["hidden"]), nn.GELU(), nn.Linear(cfg["hidden"], 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])

    step = 0
    for epoch in range(cfg["epochs"]):
        for i in range(0, len(x), cfg["batch_size"]):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x[i:i + cfg["batch_size"]]), y[i:i + cfg["batch_size"]])
            loss.backward()
            opt.step()
            step += 1
            if rank == 0 and step % cfg["log_every"] == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f}", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), "finetuned.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
