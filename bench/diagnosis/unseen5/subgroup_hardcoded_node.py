"""Per-node feature statistics: the node leader computes them and broadcasts inside the node group."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def node_stats(features):
    return torch.stack([features.mean(0), features.std(0)])


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    # the processes of this machine (tested on the workstation with 2 processes)
    node_group = dist.new_group(ranks=[0, 1])
    g = torch.Generator().manual_seed(rank)
    features = torch.randn(1000, 6, generator=g) * 3 + 5
    stats = node_stats(features) if local_rank == 0 else torch.zeros(2, 6)
    dist.broadcast(stats, src=0, group=node_group)
    mean, std = stats[0], stats[1]
    normed = (features - mean) / std
    w = torch.zeros(6, requires_grad=True)
    for _ in range(20):
        loss = (normed @ w - normed[:, 0]).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
            w.grad.zero_()
    if not torch.isfinite(loss):
        raise FloatingPointError(f"rank {rank}: loss is {loss.item()} after normalisation")
    dist.all_reduce(w.detach())
    print(f"rank {rank}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
