"""Multi-task trainer (depth regression + segmentation-style classification +
captioning tokens) with learned homoscedastic-uncertainty loss weights
(Kendall et al.): total = sum_t exp(-s_t) * L_t + s_t."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

TASKS = ("depth", "semseg", "caption")
STEPS = 10


class MultiTaskNet(nn.Module):
    def __init__(self, in_dim=40, width=64):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.heads = nn.ModuleDict({
            "depth": nn.Linear(width, 1),
            "semseg": nn.Linear(width, 12),
            "caption": nn.Linear(width, 100),
        })
        self.log_vars = nn.Parameter(torch.zeros(len(TASKS)))

    def forward(self, x, tasks):
        h = self.backbone(x)
        return {t: self.heads[t](h) for t in tasks}

    def weighted_loss(self, losses):
        total = 0.0
        for i, t in enumerate(TASKS):
            if t in losses:
                total = total + torch.exp(-self.log_vars[i]) * losses[t] + self.log_vars[i]
        return total


def make_batch(gen, n=32):
    x = torch.randn(n, 40, generator=gen)
    targets = {
        "depth": torch.rand(n, 1, generator=gen) * 10,
        "semseg": torch.randint(0, 12, (n,), generator=gen),
        "caption": torch.randint(0, 100, (n,), generator=gen),
    }
    present = [t for t in TASKS if torch.rand(1, generator=gen).item() > 0.2] or ["semseg"]
    return x, targets, present


def compute_losses(outputs, targets):
    losses = {}
    for t, out in outputs.items():
        if t == "depth":
            losses[t] = F.l1_loss(out, targets[t])
        else:
            losses[t] = F.cross_entropy(out, targets[t])
    return losses


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = MultiTaskNet()
    model = DDP(net, find_unused_parameters=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(rank)

    for step in range(STEPS):
        x, targets, present = make_batch(gen)
        outputs = model(x, present)
        losses = compute_losses(outputs, targets)
        total = model.module.weighted_loss(losses)
        opt.zero_grad()
        total.backward()
        opt.step()
        if rank == 0:
            sig = ", ".join(f"{t}={v:.3f}" for t, v in zip(TASKS, net.log_vars.exp().tolist()))
            print(f"step {step} loss {total.item():.4f} sigma^2: {sig}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
