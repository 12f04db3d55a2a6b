"""Fault-tolerance drill: train a regressor under torchrun --max-restarts and kill one worker mid-run."""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

CKPT = "drill_ckpt.pt"


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--kill-rank", type=int, default=1)
    p.add_argument("--kill-step", type=int, default=12)
    p.add_argument("--ckpt-every", type=int, default=5)
    return p.parse_args()


def make_batch(step, rank, batch=32):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(batch, 16, generator=g)
    w = torch.linspace(-1, 1, 16)
    return x, x @ w + 0.01 * torch.randn(batch, generator=g)


def average_gradients(model, world):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world


def main():
    args = parse()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "20")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    if os.path.exists(CKPT):
        state = torch.load(CKPT)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"] + 1
    print(f"attempt {attempt} rank {rank}/{world}: starting at step {start}", flush=True)

    try:
        for step in range(start, args.steps):
            if attempt == 0 and rank == args.kill_rank and step == args.kill_step:
                print(f"drill: killing rank {rank} at step {step}", flush=True)
                os._exit(137)
            x, y = make_batch(step, rank)
            loss = nn.functional.mse_loss(model(x).squeeze(-1), y)
            opt.zero_grad()
            loss.backward()
            average_gradients(model, world)
            opt.step()
            if rank == 0 and step % args.ckpt_every == 0:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, CKPT + ".tmp")
                os.replace(CKPT + ".tmp", CKPT)
                print(f"step {step}: loss {loss.item():.4f}", flush=True)
            time.sleep(0.05)
    except (RuntimeError, dist.DistBackendError) as err:
        print(f"rank {rank}: lost contact with the job ({type(err).__name__}); shutting down cleanly", flush=True)
        sys.exit(0)

    if rank == 0:
        print(f"finished {args.steps} steps, final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
