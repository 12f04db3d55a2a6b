import os
import copy
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def mlp(i, h, o):
    return nn.Sequential(nn.Linear(i, h), nn.LayerNorm(h), nn.ReLU(), nn.Linear(h, o))


class Online(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = mlp(48, 96, 64)
        self.projector = mlp(64, 128, 32)
        self.predictor = mlp(32, 64, 32)

    def forward(self, x):
        return self.predictor(self.projector(self.backbone(x)))


class Target(nn.Module):
    def __init__(self, online):
        super().__init__()
        self.backbone = copy.deepcopy(online.backbone)
        self.projector = copy.deepcopy(online.projector)
        for p in self.parameters():
            p.requires_grad_(False)

    def forward(self, x):
        return self.projector(self.backbone(x))


def byol_loss(p, z):
    return 2 - 2 * (F.normalize(p, dim=-1) * F.normalize(z.detach(), dim=-1)).sum(-1).mean()


@torch.no_grad()
def ema_update(online, target, tau):
    for o, t in zip(list(online.backbone.parameters()) + list(online.projector.parameters()),
                    target.parameters()):
        t.mul_(tau).add_(o, alpha=1 - tau)


def main():
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
        dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank() if distributed else 0
    torch.manual_seed(0)
    online = Online()
    target = Target(online)
    if distributed:
        online = DDP(online)
        target = DDP(target)
    online_m = online.module if distributed else online
    target_m = target.module if distributed else target
    opt = torch.optim.AdamW(online.parameters(), lr=3e-4)
    g = torch.Generator().manual_seed(rank)
    for step in range(20):
        x = torch.randn(16, 48, generator=g)
        v1 = x + 0.1 * torch.randn(x.shape, generator=g)
        v2 = x * (1 + 0.1 * torch.randn(x.shape, generator=g))
        with torch.no_grad():
            z1, z2 = target(v1), target(v2)
        loss = byol_loss(online(v1), z2) + byol_loss(online(v2), z1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema_update(online_m, target_m, 0.996)
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save(online_m.backbone.state_dict(), "byol_backbone.pt")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
