"""Two-stage pipeline: stage 0 (rank 0) runs its half under bf16 autocast and sends activations to stage 1."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

HIDDEN, BATCH = 256, 64


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    if rank == 0:
        stage = nn.Sequential(nn.Linear(32, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN))
        for mb in range(4):
            x = torch.randn(BATCH, 32)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                act = stage(x) + x.repeat(1, HIDDEN // 32)   # residual from the input
            dist.send(act.detach(), dst=1)
        print("stage 0: sent 4 micro-batches", flush=True)
    else:
        stage = nn.Sequential(nn.ReLU(), nn.Linear(HIDDEN, 10))
        for mb in range(4):
            act = torch.empty(BATCH, HIDDEN, dtype=torch.bfloat16)   # stage 0 runs under bf16 autocast
            dist.recv(act, src=0)
            out = stage(act.float())
            print(f"stage 1: micro-batch {mb} -> {tuple(out.shape)} mean {out.mean().item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
