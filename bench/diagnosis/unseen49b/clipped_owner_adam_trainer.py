"""Denoising autoencoder trainer with owner-sharded AdamW and global-norm clipping.

Every parameter has an owning rank that keeps its AdamW moments. Gradients are
reduced to the owner; the owner clips, steps and broadcasts the new weights.
Gradient norms are logged for the dashboard.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MAX_NORM = 1.0


class DAE(nn.Module):
    def __init__(self, d=24, h=12):
        super().__init__()
        self.enc = nn.Linear(d, h)
        self.norm = nn.LayerNorm(h)
        self.dec = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.dec(torch.tanh(self.norm(self.enc(x))))


def clip_global_norm(params, max_norm):
    grads = [p.grad for p in params if p.grad is not None]
    per_param = torch.stack([g.norm() for g in grads]) ** 2
    dist.all_reduce(per_param)
    total = per_param.sum().sqrt()
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef)
    return total, per_param.sqrt()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DAE()
    params = list(model.parameters())
    owner = {i: i % world for i in range(len(params))}
    mine = [p for i, p in enumerate(params) if owner[i] == rank]
    opt = torch.optim.AdamW(mine, lr=1e-2, weight_decay=0.0)

    g = torch.Generator().manual_seed(11 + rank)
    for step in range(25):
        clean = torch.randn(64, 24, generator=g)
        noisy = clean + 0.3 * torch.randn(64, 24, generator=g)
        loss = F.mse_loss(model(noisy), clean)
        for p in params:
            p.grad = None
        loss.backward()
        for i, p in enumerate(params):
            dist.reduce(p.grad, dst=owner[i])
            if owner[i] == rank:
                p.grad.div_(world)
            else:
                p.grad = None
        total, norms = clip_global_norm(params, MAX_NORM)
        opt.step()
        for i, p in enumerate(params):
            dist.broadcast(p.data, src=owner[i])
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f} grad_norm {total.item():.3f} "
                  f"per_param {[round(v, 3) for v in norms.tolist()]}", flush=True)
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
