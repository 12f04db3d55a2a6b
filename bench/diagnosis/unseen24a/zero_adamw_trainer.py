import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(32, 64), nn.GELU(),
        nn.Linear(64, 64), nn.GELU(),
        nn.Linear(64, 8),
    )


def batches(rank, steps, batch_size=16):
    g = torch.Generator().manual_seed(1234 + rank)
    w = torch.randn(32, 8, generator=torch.Generator().manual_seed(7))
    for _ in range(steps):
        x = torch.randn(batch_size, 32, generator=g)
        yield x, x @ w + 0.1 * torch.randn(batch_size, 8, generator=g)


def checkpoint_state(model, optimizer, step):
    optimizer.consolidate_state_dict(to=0)
    return {
        "step": step,
        "model": model.module.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": torch.get_rng_state(),
        "world_size": dist.get_world_size(),
    }


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    steps = int(os.environ.get("STEPS", "40"))
    save_every = int(os.environ.get("SAVE_EVERY", "20"))
    ckpt_dir = os.environ.get("CKPT_DIR", "checkpoints")
    if rank == 0:
        os.makedirs(ckpt_dir, exist_ok=True)

    model = DDP(build_model())
    optimizer = ZeroRedundancyOptimizer(
        model.parameters(), optimizer_class=torch.optim.AdamW, lr=3e-3, weight_decay=0.01
    )
    loss_fn = nn.MSELoss()
    t0 = time.time()
    for step, (x, y) in enumerate(batches(rank, steps), start=1):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            avg = loss.detach().clone()
            dist.all_reduce(avg)
            if rank == 0:
                print(f"step {step} loss {avg.item() / world:.4f} ({time.time() - t0:.1f}s)", flush=True)
        if step % save_every == 0:
            state = checkpoint_state(model, optimizer, step)
            if rank == 0:
                path = os.path.join(ckpt_dir, f"step{step:06d}.pt")
                torch.save(state, path + ".tmp")
                os.replace(path + ".tmp", path)
                print(f"saved {path}", flush=True)
            dist.barrier()

    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
