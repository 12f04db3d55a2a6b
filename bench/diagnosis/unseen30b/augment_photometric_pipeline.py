import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

BUCKETS = (48, 64)
BATCH = 8


def is_dist():
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def global_channel_stats(x):
    s = torch.stack([x.sum(dim=(-1, -2)), (x * x).sum(dim=(-1, -2))])
    n = torch.tensor(float(x.shape[-1] * x.shape[-2]))
    if is_dist():
        dist.all_reduce(s)
        n = n * dist.get_world_size()
    mean = s[0] / n
    var = s[1] / n - mean ** 2
    return mean, var.clamp(min=1e-6).sqrt()


def photometric(img, brightness, contrast, gamma):
    img = (img * contrast + brightness).clamp(0, 1)
    img = img.clamp(min=1e-6) ** gamma
    mean, std = global_channel_stats(img)
    return (img - mean[:, None, None]) / std[:, None, None]


augment_batch = torch.func.vmap(photometric, randomness="different")


def synthetic_batch(step, rank, size):
    g = torch.Generator().manual_seed(1000 * rank + step)
    imgs = torch.rand(BATCH, 3, size, size, generator=g)
    labels = (imgs[:, 0].mean(dim=(1, 2)) > 0.5).long()
    brightness = (torch.rand(BATCH, generator=g) - 0.5) * 0.2
    contrast = 0.8 + 0.4 * torch.rand(BATCH, generator=g)
    gamma = 0.8 + 0.4 * torch.rand(BATCH, generator=g)
    return imgs, labels, brightness, contrast, gamma


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU())
        self.fc = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc(self.conv(x).mean(dim=(2, 3)))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(Classifier())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(6):
        size = BUCKETS[step % len(BUCKETS)]
        imgs, labels, b, c, gm = synthetic_batch(step, rank, size)
        x = augment_batch(imgs, b, c, gm)
        loss = F.cross_entropy(model(x), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step} size {size} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
