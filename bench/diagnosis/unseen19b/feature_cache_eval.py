import os
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

EVAL_CFG = ("clicklogs", "2026-11-valid", 64, "zscore-v2")
CACHE_DIR = Path(os.environ.get("FEATURE_CACHE", ".cache/features"))


def cache_path(cfg):
    key = hash(cfg) & 0xFFFFFFFF
    return CACHE_DIR / f"{cfg[0]}-{cfg[1]}-{key:08x}.npy"


def compute_features(cfg, n_rows=4096):
    rng = np.random.default_rng(1234)
    raw = rng.lognormal(size=(n_rows, cfg[2])).astype(np.float32)
    t0 = time.time()
    mean, std = raw.mean(axis=0), raw.std(axis=0) + 1e-6
    feats = (raw - mean) / std
    print(f"features computed in {time.time() - t0:.2f}s", flush=True)
    return feats


def node_local_cache(cfg, local_rank):
    path = cache_path(cfg)
    if local_rank == 0 and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        feats = compute_features(cfg)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, feats)
        os.replace(tmp, path)
    dist.barrier()
    return np.load(path, mmap_mode="r")


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))

    feats = node_local_cache(EVAL_CFG, local_rank)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(EVAL_CFG[2], 16), nn.Tanh(), nn.Linear(16, 2))
    for p in model.parameters():
        dist.broadcast(p.data, src=0)

    rows = np.arange(rank, feats.shape[0], world)
    x = torch.from_numpy(np.ascontiguousarray(feats[rows]))
    labels = (x[:, 0] + x[:, 1] > 0).long()
    with torch.no_grad():
        pred = model(x).argmax(dim=1)
    stats = torch.tensor([(pred == labels).sum().item(), len(rows)], dtype=torch.float64)
    dist.all_reduce(stats)
    if rank == 0:
        print(f"eval accuracy {stats[0] / stats[1]:.4f} on {int(stats[1])} rows", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
