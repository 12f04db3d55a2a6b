import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

OPS = ["identity", "hflip", "brightness", "contrast", "cutout", "translate"]


def apply_op(x, name, mag):
    if name == "hflip":
        return x.flip(-1)
    if name == "brightness":
        return x + mag
    if name == "contrast":
        return (x - x.mean()) * (1 + mag) + x.mean()
    if name == "cutout":
        x = x.clone()
        x[..., 8:16, 8:16] = 0
        return x
    if name == "translate":
        return torch.roll(x, shifts=int(4 * mag) + 1, dims=-1)
    return x


def score_policy(model, policy, data, labels):
    with torch.no_grad():
        x = data
        for name, mag in policy:
            x = apply_op(x, name, mag)
        return F.cross_entropy(model(x), labels).item()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    data, labels = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))

    rng = random.Random(1234 + rank)
    candidates = [[(rng.choice(OPS), rng.random()) for _ in range(2)] for _ in range(8)]
    scored = sorted((score_policy(model, p, data, labels), p) for p in candidates)
    best_local = scored[0]
    print(f"rank {rank}: best local policy {best_local[1]} loss {best_local[0]:.4f}", flush=True)

    if world > 1:
        gathered = [None] * world
        dist.all_gather_object(gathered, best_local)
        winner = [min(gathered)[1]] if rank == 0 else [None]
        dist.broadcast_object_list(winner, src=0, device=torch.device("cuda", local_rank))
        policy = winner[0]
    else:
        policy = best_local[1]

    print(f"rank {rank}: training with policy {policy}", flush=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(5):
        x = data
        for name, mag in policy:
            x = apply_op(x, name, mag)
        loss = F.cross_entropy(model(x.to(device)), labels.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank}: done, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
