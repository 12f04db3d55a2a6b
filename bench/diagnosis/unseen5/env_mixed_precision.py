"""Gradient sync in the communication dtype of the mixed-precision setting (bf16 halves the traffic)."""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn


def comm_dtype():
    mode = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode, torch.float32)


def allreduce_grads(params, world):
    dtype = comm_dtype()
    flat = torch.cat([p.grad.flatten() for p in params]).to(dtype)
    dist.all_reduce(flat)
    flat = flat.float() / world
    offset = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p))
        offset += n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    args = ap.parse_args()
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    print(f"rank {args.rank}: communication dtype {comm_dtype()}", flush=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 1))
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    g = torch.Generator().manual_seed(args.rank)
    for step in range(30):
        x = torch.randn(64, 32, generator=g)
        loss = nn.functional.mse_loss(model(x), x[:, :1])
        opt.zero_grad()
        loss.backward()
        allreduce_grads(params, args.world_size)
        opt.step()
    print(f"rank {args.rank}: loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
