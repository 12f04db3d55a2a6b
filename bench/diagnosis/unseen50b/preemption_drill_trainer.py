"""Regression trainer with a built-in preemption drill.

Halfway through, the job drops its model and optimizer and rebuilds them from
the newest snapshot on disk, exactly as a restarted job would, then finishes.
"""
import datetime
import glob
import os
import re
import shutil

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

TOTAL_STEPS = 60
DRILL_AT = 30
BATCH = 32
CKPT_DIR = "snapshots"


def build(lr):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    ddp = DDP(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
    return ddp, opt, sched


def batch_for(step, rank):
    g = torch.Generator().manual_seed(1000 * rank + step)
    x = torch.randn(BATCH, 16, generator=g)
    y = x[:, :4].sum(dim=1, keepdim=True) + 0.1 * torch.randn(BATCH, 1, generator=g)
    return x, y


def save_snapshot(rank, step, ddp, opt, sched):
    path = os.path.join(CKPT_DIR, f"worker{rank:02d}-step{step:06d}.pt")
    torch.save({"model": ddp.module.state_dict(), "opt": opt.state_dict(),
                "sched": sched.state_dict(), "rng": torch.get_rng_state()}, path + ".tmp")
    os.replace(path + ".tmp", path)
    return path


def latest_snapshot(rank):
    found = sorted(glob.glob(os.path.join(CKPT_DIR, f"worker{rank:02d}-step*.pt")))
    if not found:
        return None, 0
    name = os.path.basename(found[-1])
    step = int(re.search(r"(\d+)", name).group(1))
    return found[-1], step


def train(ddp, opt, sched, rank, start, stop, loss_fn):
    for step in range(start, stop):
        x, y = batch_for(step, rank)
        loss = loss_fn(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % 10 == 0 and rank == 0:
            print(f"step {step:3d} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.2e}", flush=True)
    return loss.detach()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    if int(os.environ.get("LOCAL_RANK", "0")) == 0:
        shutil.rmtree(CKPT_DIR, ignore_errors=True)
        os.makedirs(CKPT_DIR, exist_ok=True)
    dist.barrier()

    loss_fn = nn.MSELoss()
    ddp, opt, sched = build(lr=3e-3)
    train(ddp, opt, sched, rank, 0, DRILL_AT, loss_fn)
    save_snapshot(rank, DRILL_AT, ddp, opt, sched)
    del ddp, opt, sched

    ddp, opt, sched = build(lr=3e-3)
    path, start = latest_snapshot(rank)
    state = torch.load(path, weights_only=True)
    ddp.module.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    sched.load_state_dict(state["sched"])
    torch.set_rng_state(state["rng"])
    print(f"[rank {rank}] resumed from {path} at step {start}", flush=True)
    last = train(ddp, opt, sched, rank, start, TOTAL_STEPS, loss_fn)

    dist.all_reduce(last, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"final mean loss {last.item() / world:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
