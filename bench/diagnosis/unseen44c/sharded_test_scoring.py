"""Data step for offline scoring: rank 0 owns the list of test-row ids, deals one
contiguous block to every rank, each rank scores its rows, and the scored counts are
reduced into a summary."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

TEST_ROWS = 10_001
FEATURES = 16


def load_row_ids(seed=99):
    g = torch.Generator().manual_seed(seed)
    return torch.randperm(TEST_ROWS, generator=g)


def features_for(ids):
    g = torch.Generator().manual_seed(5)
    table = torch.randn(TEST_ROWS, FEATURES, generator=g)
    return table[ids]


def deal_rows(rank, world):
    per_rank = TEST_ROWS // world
    mine = torch.empty(per_rank, dtype=torch.long)
    if rank == 0:
        ids = load_row_ids()
        blocks = list(torch.tensor_split(ids, world))
        dist.scatter(mine, scatter_list=blocks, src=0)
    else:
        dist.scatter(mine, src=0)
    return mine


@torch.no_grad()
def score(model, ids):
    feats = features_for(ids)
    probs = torch.sigmoid(model(feats).squeeze(-1))
    return probs


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1)).eval()

    if world > 1:
        my_ids = deal_rows(rank, world)
    else:
        my_ids = load_row_ids()
    print(f"[rank {rank}] scoring {my_ids.numel()} rows", flush=True)

    probs = score(model, my_ids)
    summary = torch.tensor([float(my_ids.numel()), float((probs > 0.5).sum()), float(probs.sum())],
                           dtype=torch.float64)
    dist.all_reduce(summary)
    if rank == 0:
        rows, positives, mass = summary.tolist()
        print(f"scored={int(rows)} positive={int(positives)} mean_prob={mass / rows:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
