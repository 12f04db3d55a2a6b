"""Fine-tune a small tabular regressor on 2 nodes with DDP, in half precision to halve the weights' memory.

The model and its inputs are cast to float16 once; Adam with its usual settings; a NaN guard stops the job
(every rank) as soon as the averaged loss is not finite, so a bad run does not burn the allocation.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 60
BATCH = 128
FEATURES = 48


def make_batch(gen: torch.Generator, w_true: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(BATCH, FEATURES, generator=gen)
    # targets are small relative changes (a few per cent), as in the real data set
    y = 0.02 * torch.tanh(x @ w_true) + 0.001 * torch.randn(BATCH, 1, generator=gen)
    return x, y


def main() -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(FEATURES, 256), nn.ReLU(),
        nn.Linear(256, 256), nn.ReLU(),
        nn.Linear(256, 1),
    ).half()
    model = DDP(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, weight_decay=0.0)
    loss_fn = nn.MSELoss()

    w_true = torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(1234))
    gen = torch.Generator().manual_seed(1000 + rank)
    for step in range(STEPS):
        x, y = make_batch(gen, w_true)
        pred = model(x.half())
        loss = loss_fn(pred, y.half())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

        avg = loss.detach().float().clone()
        dist.all_reduce(avg)
        avg /= world
        if rank == 0 and step % 5 == 0:
            print(f"step {step:3d}  loss {avg.item():.6f}", flush=True)
        if not torch.isfinite(avg):
            raise RuntimeError(f"loss is {avg.item()} at step {step} (rank {rank}); stopping the run")

    if rank == 0:
        print(f"done: final loss {avg.item():.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
