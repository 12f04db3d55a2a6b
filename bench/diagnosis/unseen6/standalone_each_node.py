"""Fine-tune a small regression model with DDP and write the results into one output folder.
Launched with torchrun on each machine; RANK/WORLD_SIZE come from torchrun."""
import datetime
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

OUTPUT_DIR = Path("outputs/finetune-run")


def prepare_output_dir(overwrite=False):
    """Refuse to mix results with an earlier run's (as the Transformers Trainer does)."""
    if OUTPUT_DIR.exists() and any(OUTPUT_DIR.iterdir()) and not overwrite:
        raise ValueError(f"Output directory ({OUTPUT_DIR}) already exists and is not empty.")
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUTPUT_DIR / "config.json").write_text(json.dumps({"world_size": dist.get_world_size(), "lr": 0.01}))


def shard(rank, world, n=4096, seed=5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = torch.sin(x[:, :4].sum(1)) + 0.1 * torch.randn(n, generator=g)
    return x[rank::world], y[rank::world]


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        prepare_output_dir()
    dist.barrier()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = shard(rank, world)
    for epoch in range(4):
        for xb, yb in zip(x.split(32), y.split(32)):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(xb).squeeze(-1), yb)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f} on {len(x)} samples per rank, world {world}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), OUTPUT_DIR / "model.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
