"""DDP training with asynchronous checkpoints: every 10 steps the model and optimizer state are handed to
torch.distributed.checkpoint.async_save so that training does not wait for the disk; the previous save is
awaited before a new one starts, and the last one before exit."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CKPT_ROOT = "/tmp/async_ckpt"


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    model = DDP(net)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)

    pending = None
    for step in range(60):
        x, y = torch.randn(32, 64, generator=g), torch.randint(0, 10, (32,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 9:
            if pending is not None:
                pending.result()
            state = {"model": net.state_dict(), "optim": optimizer.state_dict(), "step": step}
            pending = dcp.async_save(state, checkpoint_id=f"{CKPT_ROOT}/step-{step:04d}")
            if rank == 0:
                print(f"step {step}: loss {loss.item():.4f}, checkpoint started", flush=True)
    if pending is not None:
        pending.result()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
