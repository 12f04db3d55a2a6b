import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

BASE_SEED = int(os.environ.get("AUG_SEED", "2718281828"))


def seed_augmentation(rank):
    seed = BASE_SEED * (rank + 1)
    np.random.seed(seed)
    return seed


def mixup_cutmix(x, y, num_classes, alpha=0.4):
    lam = float(np.random.beta(alpha, alpha))
    perm = torch.from_numpy(np.random.permutation(x.size(0)))
    y1 = F.one_hot(y, num_classes).float()
    if np.random.rand() < 0.5:
        x = lam * x + (1 - lam) * x[perm]
    else:
        h, w = x.shape[-2:]
        ch, cw = int(h * np.sqrt(1 - lam)), int(w * np.sqrt(1 - lam))
        cy, cx = np.random.randint(h), np.random.randint(w)
        y0, y1b, x0, x1b = max(cy - ch // 2, 0), min(cy + ch // 2, h), max(cx - cw // 2, 0), min(cx + cw // 2, w)
        x = x.clone()
        x[..., y0:y1b, x0:x1b] = x[perm][..., y0:y1b, x0:x1b]
        lam = 1 - (y1b - y0) * (x1b - x0) / (h * w)
    return x, lam * y1 + (1 - lam) * y1[perm]


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    seed = seed_augmentation(rank)
    print(f"rank {rank}/{world}: augmentation seed {seed}", flush=True)

    model = DDP(nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                              nn.Flatten(), nn.Linear(16, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(256, 3, 32, 32)
    labels = torch.randint(0, 10, (256,))
    shard = torch.arange(rank, 256, world)
    for epoch in range(2):
        for i in range(0, len(shard), 32):
            idx = shard[i:i + 32]
            x, soft = mixup_cutmix(images[idx], labels[idx], 10)
            loss = torch.sum(-soft * F.log_softmax(model(x), dim=1), dim=1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t)
        if rank == 0:
            print(f"epoch {epoch}: mean loss {t.item() / world:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
