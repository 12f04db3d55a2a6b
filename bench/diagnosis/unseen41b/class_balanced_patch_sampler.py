"""Draw a class-balanced list of training patches from each rank's share of the cohort, then train a small 3D net."""
import os
import datetime
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

N_CASES = 24
VOL = (32, 32, 32)
PATCH = 16
PATCHES_PER_RANK = 12


def make_case(idx):
    rng = np.random.default_rng(1000 + idx)
    img = rng.normal(size=VOL).astype(np.float32)
    lab = np.zeros(VOL, dtype=np.int64)
    if idx % 4 == 0:
        c = rng.integers(8, 24, size=3)
        lab[c[0] - 4:c[0] + 4, c[1] - 4:c[1] + 4, c[2] - 4:c[2] + 4] = 1
        img[lab == 1] += 2.0
    return img, lab


def case_weights(labels):
    has_fg = np.array([float(l.any()) for l in labels])
    n_fg = torch.tensor([has_fg.sum(), len(has_fg) - has_fg.sum()], dtype=torch.float64)
    dist.all_reduce(n_fg)
    w_fg = 0.5 / max(n_fg[0].item(), 1.0)
    w_bg = 0.5 / max(n_fg[1].item(), 1.0)
    return np.where(has_fg > 0, w_fg, w_bg)


def sample_patches(images, labels, rng):
    w = case_weights(labels)
    total = torch.tensor([w.sum()], dtype=torch.float64)
    dist.all_reduce(total)
    p = w / total.item()
    picks = rng.choice(len(images), size=PATCHES_PER_RANK, replace=True, p=p)
    xs, ys = [], []
    for i in picks:
        z, y, x = rng.integers(0, VOL[0] - PATCH + 1, size=3)
        xs.append(images[i][z:z + PATCH, y:y + PATCH, x:x + PATCH])
        ys.append(labels[i][z:z + PATCH, y:y + PATCH, x:x + PATCH])
    return torch.from_numpy(np.stack(xs))[:, None], torch.from_numpy(np.stack(ys))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    my_cases = list(range(rank, N_CASES, world))
    data = [make_case(i) for i in my_cases]
    images = [d[0] for d in data]
    labels = [d[1] for d in data]
    rng = np.random.default_rng(rank)

    model = DDP(nn.Sequential(nn.Conv3d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv3d(8, 2, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    weight = torch.tensor([0.2, 0.8])
    for epoch in range(3):
        x, y = sample_patches(images, labels, rng)
        for b in range(0, len(x), 4):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[b:b + 4]), y[b:b + 4], weight=weight)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f} fg patches {(y.sum((1, 2, 3)) > 0).sum().item()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
