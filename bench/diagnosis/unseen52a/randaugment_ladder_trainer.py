import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

AUGMENT_OPS = {
    "hflip": lambda x, m: x.flip(-1),
    "solarize": lambda x, m: torch.where(x > 1 - m, -x, x),
    "posterize": lambda x, m: torch.round(x * (4 + 4 * m)) / (4 + 4 * m),
}


def rank_policy(rank, base_ops=1):
    num_ops = base_ops + rank
    magnitude = min(0.9, 0.2 + 0.15 * rank)
    return num_ops, magnitude


def rand_augment(x, num_ops, magnitude, rng):
    for name in rng.sample(sorted(AUGMENT_OPS), num_ops):
        x = AUGMENT_OPS[name](x, magnitude)
    return x


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    num_ops, magnitude = rank_policy(rank)
    rng = random.Random(17 + rank)
    print(f"rank {rank}/{world}: RandAugment N={num_ops} M={magnitude:.2f}", flush=True)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    for step in range(6):
        x = torch.randn(16, 3, 32, 32, generator=g)
        y = torch.randint(0, 10, (16,), generator=g)
        views = torch.cat([x, rand_augment(x, num_ops, magnitude, rng)])
        loss = F.cross_entropy(model(views), torch.cat([y, y]), label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 2 == 0:
            t = loss.detach().clone()
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step}: loss {t.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
