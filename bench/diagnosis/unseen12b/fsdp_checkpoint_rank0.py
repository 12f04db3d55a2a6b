"""Train an MLP regressor sharded with FSDP2 (fully_shard) and keep a full checkpoint after every epoch.

The checkpoint is written by rank 0 only, as one consolidated file that loads without FSDP.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


class Regressor(nn.Module):
    def __init__(self, dim=64, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(dim, dim), nn.GELU()) for _ in range(depth))
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.head(x).sum(-1)


def save_checkpoint(model, epoch, folder):
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    path = os.path.join(folder, f"epoch{epoch}.pt")
    torch.save({"epoch": epoch, "model": state}, path)
    print(f"saved {path} ({len(state)} tensors)", flush=True)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = Regressor()
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    folder = os.path.join(os.getcwd(), "checkpoints")
    os.makedirs(folder, exist_ok=True)

    g = torch.Generator().manual_seed(100 + rank)
    w_true = torch.randn(64, generator=torch.Generator().manual_seed(7))
    for epoch in range(3):
        for step in range(20):
            x = torch.randn(32, 64, generator=g)
            y = x @ w_true
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)
        if rank == 0:
            save_checkpoint(model, epoch, folder)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
