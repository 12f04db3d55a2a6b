"""Mixed-precision (bf16 autocast on CPU) training with a GradScaler and gradient clipping, Trainer-style."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, max_grad_norm=1.0):
        self.model = DDP(model)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.scaler = torch.amp.GradScaler("cpu")
        self.max_grad_norm = max_grad_norm

    def clip_gradients(self):
        self.scaler.unscale_(self.opt)
        return torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)

    def training_step(self, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(self.model(x), y)
        self.opt.zero_grad()
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.opt)          # unscale so the logged norm is the true one
        norm = self.clip_gradients()
        self.scaler.step(self.opt)
        self.scaler.update()
        return loss.item(), norm.item()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    trainer = Trainer(nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)))
    gen = torch.Generator().manual_seed(rank)
    for step in range(20):
        x = torch.randn(32, 32, generator=gen)
        loss, norm = trainer.training_step(x, x[:, :8].argmax(1))
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss:.3f} grad norm {norm:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
