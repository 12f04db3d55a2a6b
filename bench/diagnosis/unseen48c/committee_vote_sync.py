import os
import datetime
import numpy as np
import torch
import torch.nn as nn
import torch.distributed as dist

PER_RANK = 256
FEAT = 10
CLASSES = 3
MEMBERS = 3
TOP_FRACTION = 0.05


def shard(rank):
    rng = np.random.default_rng(2024 + rank)
    spread = 1.0 + 2.0 * rank
    x = rng.normal(0.0, spread, size=(PER_RANK, FEAT)).astype(np.float32)
    return torch.from_numpy(x)


def committee():
    members = []
    for m in range(MEMBERS):
        torch.manual_seed(10 + m)
        members.append(nn.Sequential(nn.Linear(FEAT, 16), nn.Tanh(), nn.Linear(16, CLASSES)))
    return members


def vote_entropy(members, x):
    with torch.no_grad():
        votes = torch.stack([m(x).argmax(-1) for m in members], dim=1)
    counts = torch.stack([(votes == c).sum(1) for c in range(CLASSES)], dim=1).float()
    p = counts / MEMBERS
    return -(p * p.clamp_min(1e-12).log()).sum(1)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    x = shard(rank)
    members = committee()
    ve = vote_entropy(members, x)

    cut = torch.quantile(ve, 1.0 - TOP_FRACTION).item()
    keep = (ve >= cut).nonzero().flatten()
    local_rows = [[rank * PER_RANK + int(i), float(ve[i])] for i in keep]

    gathered = [None] * world
    dist.all_gather_object(gathered, local_rows)
    table = torch.tensor(gathered)
    flat = table.reshape(-1, 2)
    order = flat[:, 1].argsort(descending=True)
    query = flat[order, 0].long()
    if rank == 0:
        print(f"committee disagreement: {len(query)} items to label, "
              f"top score {flat[order[0], 1]:.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
