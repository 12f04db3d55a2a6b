"""Data step: decode variable-size audio clips once and cache the features on each node's local disk."""
import json
import os
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

CPU_WORKERS_PER_NODE = 3
PREFETCH = 4
N_CLIPS = 96
CACHE_DIR = os.path.join(os.getcwd(), "feature_cache")


class ClipDataset(Dataset):
    def __init__(self, ids):
        self.ids = ids

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        cid = self.ids[i]
        rng = np.random.default_rng(cid)
        n = 1600 + 160 * int(rng.integers(0, 40))
        wave = rng.standard_normal(n).astype(np.float32)
        frames = torch.from_numpy(wave).unfold(0, 400, 160)
        spec = torch.fft.rfft(frames * torch.hann_window(400)).abs().pow(2)
        return cid, torch.log1p(spec[:, :80])


def keep_ragged(batch):
    return [c for c, _ in batch], [f for _, f in batch]


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    os.makedirs(CACHE_DIR, exist_ok=True)
    my_ids = list(range(rank, N_CLIPS, world))
    num_workers = CPU_WORKERS_PER_NODE // int(os.environ.get("WORLD_SIZE", "1"))
    loader = DataLoader(
        ClipDataset(my_ids),
        batch_size=8,
        num_workers=num_workers,
        prefetch_factor=PREFETCH,
        collate_fn=keep_ragged,
    )
    t0 = time.time()
    frames = 0
    for cids, feats in loader:
        for cid, f in zip(cids, feats):
            np.save(os.path.join(CACHE_DIR, f"clip{cid:05d}.npy"), f.numpy())
            frames += f.shape[0]
    stats = torch.tensor([len(my_ids), frames], dtype=torch.float64)
    dist.all_reduce(stats)
    if rank == 0:
        summary = {"clips": int(stats[0]), "frames": int(stats[1]), "seconds": round(time.time() - t0, 2)}
        with open(os.path.join(CACHE_DIR, "summary.json"), "w") as fh:
            json.dump(summary, fh)
        print("cache warm:", summary, flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
