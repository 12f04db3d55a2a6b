"""Trainer that compresses DDP's gradient traffic to fp16 (a communication hook), set up together with the
logging in the main-process-only setup block."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 5)))
    if rank == 0:
        # main-process setup: logging and bandwidth savings
        print(f"params: {sum(p.numel() for p in model.parameters())}", flush=True)
        model.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(20):
        x, y = torch.randn(32, 20), torch.randint(0, 5, (32,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
