"""Train a small regression MLP with DDP; only rank 0 talks on the console (CPU, gloo, torchrun).

Like many detection/vision codebases (setup_for_distributed), the other ranks' stdout is swapped for a sink so the
console is not flooded with one copy of every line per rank.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class _Quiet:
    """A stdout that swallows text: what a non-zero rank prints goes nowhere."""

    def write(self, text):
        return len(text)


def setup_for_distributed(is_master):
    if not is_master:
        sys.stdout = _Quiet()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    setup_for_distributed(rank == 0)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(100 + rank)
    w_true = torch.arange(8, dtype=torch.float32) / 8
    steps = 40
    for step in range(1, steps + 1):
        x = torch.randn(64, 8, generator=g)
        y = (x @ w_true).unsqueeze(1) + 0.01 * torch.randn(64, 1, generator=g)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"rank {rank}: step {step}/{steps} loss {loss.item():.4f}")
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:  # the final report: validation error of the trained model on a large held-out set
        with torch.no_grad():
            gv = torch.Generator().manual_seed(7)
            errors = []
            for _ in range(400):
                xv = torch.randn(256, 8, generator=gv)
                errors.append(F.mse_loss(model(xv), (xv @ w_true).unsqueeze(1)).item())
        print(f"validation mse {sum(errors) / len(errors):.4f}")
    # the last line must reach the job log before the process ends
    print(f"rank {rank}: done, final loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
