"""Classifier that writes a JSON-lines metrics log next to the script and prints a summary from it at the end.

Launch: torchrun --nnodes 2 --nproc-per-node 1 ... metrics_jsonl_every_rank.py
"""
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 60
METRICS = "metrics.jsonl"


class MetricsLog:
    def __init__(self, path):
        self.file = open(path, "w", buffering=1)

    def write(self, **record):
        self.file.write(json.dumps(record) + "\n")

    def close(self):
        self.file.close()


def summary(path):
    records = [json.loads(line) for line in open(path)]
    steps = [r["step"] for r in records]
    if steps != list(range(STEPS)):
        raise RuntimeError(f"{path}: {len(records)} records, steps {steps[:3]}...{steps[-3:]}, expected 0..{STEPS - 1}")
    return records[0]["loss"], records[-1]["loss"]


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    log = MetricsLog(METRICS)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        x = torch.randn(32, 16, generator=g)
        y = x[:, :3].argmax(1)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.write(step=step, loss=round(loss.item(), 6), lr=0.05)
    log.close()
    dist.barrier()
    if rank == 0:
        first, last = summary(METRICS)
        print(f"loss {first:.4f} -> {last:.4f} over {STEPS} steps", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
