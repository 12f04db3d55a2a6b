"""Toy LM fine-tune: every few steps the checkpoint is written atomically (tmp file + os.replace)."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CKPT_DIR = "checkpoints"


def atomic_save(state, path):
    tmp = path + ".tmp"
    torch.save(state, tmp)
    dist.barrier()  # make sure the tmp file is complete everywhere before publishing it
    os.replace(tmp, path)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Embedding(500, 32), nn.Flatten(), nn.Linear(32 * 8, 500)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    os.makedirs(CKPT_DIR, exist_ok=True)
    g = torch.Generator().manual_seed(rank)
    for step in range(1, 31):
        tokens = torch.randint(0, 500, (16, 8), generator=g)
        target = torch.randint(0, 500, (16,), generator=g)
        loss = nn.functional.cross_entropy(model(tokens), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            atomic_save({"step": step, "model": model.module.state_dict(), "opt": opt.state_dict()},
                        os.path.join(CKPT_DIR, "last.pt"))
            if rank == 0:
                print(f"step {step}: saved, loss {loss.item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
