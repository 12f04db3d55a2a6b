"""Per-slice accuracy / calibration report for a classifier, sharded over ranks."""
import functools
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F

N_CLASSES = 5
N_BINS = 10
SLICES = ["age<30", "age30-50", "age>50", "region_n", "region_s"]


def make_shard(rank, world, n_total=3000):
    g = torch.Generator().manual_seed(1234)
    logits = torch.randn(n_total, N_CLASSES, generator=g) * 2.0
    labels = torch.randint(0, N_CLASSES, (n_total,), generator=g)
    slice_ids = torch.randint(0, len(SLICES), (n_total,), generator=g)
    idx = torch.arange(rank, n_total, world)
    return logits[idx], labels[idx], slice_ids[idx]


def slice_stats(logits, labels, slice_ids, temperature):
    probs = F.softmax(logits / temperature, dim=-1)
    conf, pred = probs.max(dim=-1)
    correct = (pred == labels).float()
    nll = F.cross_entropy(logits / temperature, labels, reduction="none")
    out = {}
    for s, name in enumerate(SLICES):
        m = slice_ids == s
        bins = torch.clamp((conf[m] * N_BINS).long(), max=N_BINS - 1)
        gap = torch.zeros(N_BINS)
        gap.index_add_(0, bins, conf[m] - correct[m])
        out[name] = (int(m.sum()), float(correct[m].sum()), float(nll[m].sum()),
                     float(gap.abs().sum()))
    return out


def merge(a, b):
    merged = dict(a)
    for name, stats in b.items():
        merged[name] = merged.get(name, ()) + stats
    return merged


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    logits, labels, slice_ids = make_shard(rank, world)
    temperature = float(os.environ.get("CALIB_TEMPERATURE", "1.7"))

    local = slice_stats(logits, labels, slice_ids, temperature)
    gathered = [None] * world
    dist.all_gather_object(gathered, local)
    merged = functools.reduce(merge, gathered)

    if rank == 0:
        report = {}
        for name in SLICES:
            n, n_correct, nll_sum, gap_sum = merged[name]
            report[name] = {"n": n, "accuracy": n_correct / max(n, 1),
                            "nll": nll_sum / max(n, 1), "ece": gap_sum / max(n, 1)}
        print(json.dumps({"temperature": temperature, "slices": report}, indent=2))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
