"""Distributed evaluation: every rank predicts its shard, predictions are all-gathered for the metric."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

N = 400


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    ids = torch.arange(rank, N, world)                 # this rank's samples
    preds = (ids * 7919) % 5                           # stand-in for model output
    pair = torch.stack([ids, preds], dim=1)
    gathered = [torch.empty_like(pair)] * world
    dist.all_gather(gathered, pair)
    allp = torch.cat(gathered)
    unique_ids = allp[:, 0].unique().numel()
    if rank == 0:
        print(f"gathered {allp.shape[0]} predictions, {unique_ids} distinct samples", flush=True)
    if unique_ids != N:
        raise RuntimeError(f"rank {rank}: evaluation saw {unique_ids} distinct samples out of {N}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
