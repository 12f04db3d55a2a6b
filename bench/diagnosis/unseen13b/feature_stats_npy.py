"""Train a regressor on 2 nodes with DDP on standardised features.

Rank 0 computes the per-feature mean and std over the training file once and writes them next to the run
(`feature_stats`) so the other ranks (and the later inference job) use exactly the same numbers; the other ranks
wait for that file to appear on the shared run folder, then load it.
"""
import datetime
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STATS = os.path.join("artifacts", "feature_stats")
FEATURES = 16


def training_matrix() -> np.ndarray:
    rng = np.random.default_rng(5)
    scales = np.logspace(-2, 3, FEATURES)
    return (rng.standard_normal((4096, FEATURES)) * scales + 10 * scales).astype(np.float32)


def wait_for(path: str, poll: float = 1.0) -> None:
    waited = 0.0
    while not os.path.exists(path):
        time.sleep(poll)
        waited += poll
        if waited % 30 == 0:
            print(f"still waiting for {path} ({waited:.0f} s)", flush=True)


def main() -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    data = training_matrix()

    if rank == 0:
        os.makedirs("artifacts", exist_ok=True)
        stats = np.stack([data.mean(axis=0), data.std(axis=0)])
        np.save(STATS, stats)
        print(f"rank 0: wrote feature statistics to {STATS}", flush=True)
    else:
        wait_for(STATS)
        stats = np.load(STATS)
    mean, std = torch.from_numpy(stats[0]), torch.from_numpy(stats[1])

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_all = (torch.from_numpy(data[rank::world]) - mean) / std
    y_all = x_all[:, :4].sum(dim=1, keepdim=True)
    for epoch in range(5):
        for i in range(0, len(x_all), 128):
            x, y = x_all[i:i + 128], y_all[i:i + 128]
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
