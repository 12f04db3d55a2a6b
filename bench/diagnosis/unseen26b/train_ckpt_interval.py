import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description="regression trainer with time-based checkpoints")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--ckpt-every-s", type=float, default=4.0)
    p.add_argument("--out", default="ckpt_interval")
    return p.parse_args()


def make_model():
    return nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 1))


def baseline_eval(model, n_batches=400):
    g = torch.Generator().manual_seed(1234)
    total = 0.0
    with torch.no_grad():
        for _ in range(n_batches):
            x = torch.randn(256, 32, generator=g)
            y = x.sum(dim=1, keepdim=True)
            total += nn.functional.mse_loss(model(x), y).item()
    return total / n_batches


class TimedCheckpointer:
    def __init__(self, every_s, out_dir):
        self.every_s = every_s
        self.out_dir = out_dir
        self.last = time.monotonic()

    def due(self):
        return time.monotonic() - self.last >= self.every_s

    def save(self, model, opt, step, samples_seen):
        positions = [None] * dist.get_world_size()
        dist.all_gather_object(positions, {"rank": dist.get_rank(), "samples": samples_seen})
        if dist.get_rank() == 0:
            os.makedirs(self.out_dir, exist_ok=True)
            torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict(),
                        "positions": positions}, os.path.join(self.out_dir, f"step{step:06d}.pt"))
            print(f"[ckpt] step {step} saved", flush=True)
        dist.barrier()
        self.last = time.monotonic()


def main():
    args = parse_args()
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = make_model()
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    if rank == 0:
        print(f"baseline mse {baseline_eval(model):.4f}", flush=True)
    ckpt = TimedCheckpointer(args.ckpt_every_s, args.out)
    g = torch.Generator().manual_seed(100 + rank)
    samples = 0
    for step in range(1, args.steps + 1):
        x = torch.randn(args.batch_size, 32, generator=g)
        y = x.sum(dim=1, keepdim=True)
        loss = nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        samples += x.shape[0]
        if step % 50 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if ckpt.due():
            ckpt.save(model, opt, step, samples)
        time.sleep(0.01)
    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
