"""Data-parallel parity test: one DDP step over 2 ranks must match one step on the whole batch in one process."""
import copy
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 1))
    reference = copy.deepcopy(model)
    x = torch.randn(64, 10)
    y = torch.randn(64)
    ddp = DDP(model)
    local = slice(rank * 64 // world, (rank + 1) * 64 // world)
    loss = nn.functional.mse_loss(ddp(x[local]).squeeze(-1), y[local])
    loss = loss / world  # average the loss over the ranks
    loss.backward()

    ref_loss = nn.functional.mse_loss(reference(x).squeeze(-1), y)
    ref_loss.backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        if not torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-6):
            ratio = (p.grad.norm() / q.grad.norm()).item()
            raise RuntimeError(f"parity check failed on rank {rank}: gradient of {name} is {ratio:.3f} x the "
                               f"single-process gradient")
    print(f"rank {rank} parity ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
