"""Train a small residual MLP on 2 nodes with FSDP2 (torch.distributed.fsdp.fully_shard), moved over from DDP.

`build()` returns the model and its optimizer as before; the model is then sharded block by block and at the root,
as the FSDP2 tutorial shows. Rank 0 checks at the end that the training loss fell, as the nightly job does, and
exits with code 3 when it did not.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

DIM = 32
STEPS = 60


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.ff = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ff(self.norm(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.out = nn.Linear(DIM, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def build() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    return model, optimizer


def main() -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    model, optimizer = build()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)

    target = torch.randn(DIM, 1, generator=torch.Generator().manual_seed(42))
    gen = torch.Generator().manual_seed(7 + rank)
    losses = []
    for step in range(STEPS):
        x = torch.randn(64, DIM, generator=gen)
        y = x @ target
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        losses.append(avg.item() / world)
        if rank == 0 and step % 10 == 0:
            print(f"step {step:3d}  loss {losses[-1]:.4f}", flush=True)

    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    dist.destroy_process_group()
    if rank == 0:
        print(f"loss first 5 steps {first:.4f}, last 5 steps {last:.4f}", flush=True)
        if last > 0.5 * first:
            print("training loss did not fall: failing the nightly check", flush=True)
            sys.exit(3)


if __name__ == "__main__":
    main()
