"""Token classifier that prints a throughput report with thousands separators in the user's locale.

Launch: torchrun --nnodes 2 --nproc-per-node 1 ... locale_node1.py
"""
import locale
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

EPOCHS = 3
STEPS = 20
BATCH = 512


def report(epoch, tokens, seconds):
    locale.setlocale(locale.LC_ALL, "")
    rate = locale.format_string("%d", int(tokens / seconds), grouping=True)
    total = locale.format_string("%d", tokens, grouping=True)
    print(f"[rank {dist.get_rank()}] epoch {epoch}: {total} tokens, {rate} tokens/s", flush=True)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Embedding(1000, 32), nn.Linear(32, 5)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(dist.get_rank())
    tokens = 0
    for epoch in range(EPOCHS):
        start = time.perf_counter()
        for step in range(STEPS):
            x = torch.randint(0, 1000, (BATCH,), generator=g)
            y = x % 5
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            tokens += BATCH
        report(epoch, tokens, time.perf_counter() - start)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
