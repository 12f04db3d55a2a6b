"""Data step: turn an unlabelled pool into soft and sampled pseudo-labels from a teacher ensemble.

Every rank hosts one member of the teacher ensemble and scores the same unlabelled pool.
The members' tempered distributions are merged across ranks, then each rank samples
pseudo-labels for its share of the pool and writes them to its local output folder.
"""
import os
import json
import datetime

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

NUM_CLASSES = 6
FEATURES = 24
POOL = 256
TEMPERATURE = 2.0
OUT_DIR = "pseudo_labels"


def load_member(member_id):
    torch.manual_seed(500 + member_id)
    net = nn.Sequential(nn.Linear(FEATURES, 64), nn.Tanh(), nn.Linear(64, NUM_CLASSES))
    return net.eval()


def unlabelled_pool():
    g = torch.Generator().manual_seed(2024)
    return torch.randn(POOL, FEATURES, generator=g)


@torch.no_grad()
def ensemble_distribution(member, pool):
    probs = F.softmax(member(pool) / TEMPERATURE, dim=-1).double()
    dist.all_reduce(probs, op=dist.ReduceOp.SUM)
    return probs


def sample_pseudo_labels(probs, lo, hi, seed):
    rng = np.random.default_rng(seed)
    rows = probs[lo:hi].numpy()
    labels = [int(rng.choice(NUM_CLASSES, p=row)) for row in rows]
    entropy = -(probs[lo:hi] * probs[lo:hi].clamp_min(1e-12).log()).sum(-1)
    return labels, entropy


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    member = load_member(rank)
    pool = unlabelled_pool()
    probs = ensemble_distribution(member, pool)

    per_rank = (POOL + world - 1) // world
    lo, hi = rank * per_rank, min(POOL, (rank + 1) * per_rank)
    labels, entropy = sample_pseudo_labels(probs, lo, hi, seed=7 + rank)

    os.makedirs(OUT_DIR, exist_ok=True)
    out = os.path.join(OUT_DIR, f"part-{rank:05d}.json")
    with open(out, "w") as f:
        json.dump({"range": [lo, hi], "labels": labels,
                   "soft": probs[lo:hi].float().tolist()}, f)

    summary = torch.tensor([float(len(labels)), float(entropy.sum())])
    dist.all_reduce(summary)
    if rank == 0:
        print(f"wrote pseudo-labels for {int(summary[0])} samples; "
              f"mean entropy {summary[1].item() / summary[0].item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
