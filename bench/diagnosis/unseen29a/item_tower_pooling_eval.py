import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

TAG_BUCKETS = 4096
DIM = 24
ITEMS_PER_RANK = 64


def item_features(rank):
    g = torch.Generator().manual_seed(500 + rank)
    lengths = torch.randint(1, 9, (ITEMS_PER_RANK,), generator=g)
    values = torch.randint(0, TAG_BUCKETS, (int(lengths.sum()),), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    labels = torch.randint(0, 10, (ITEMS_PER_RANK,), generator=g)
    return values, offsets, labels


class ItemTower(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.tags = nn.EmbeddingBag(TAG_BUCKETS, DIM, mode="sum")
        self.head = nn.Linear(DIM, DIM)

    def forward(self, values, offsets):
        lengths = torch.diff(offsets, append=offsets.new_tensor([values.numel()]))
        weights = (1.0 / lengths.clamp(min=1).float()).repeat_interleave(lengths)
        pooled = self.tags(values, offsets, per_sample_weights=weights)
        return F.normalize(self.head(pooled), dim=1)


def gather_batch(values, offsets, labels, world):
    parts = [None] * world
    dist.all_gather_object(parts, (values, offsets, labels))
    all_values = torch.cat([p[0] for p in parts])
    all_offsets = torch.cat([p[1] for p in parts])
    all_labels = torch.cat([p[2] for p in parts])
    return all_values, all_offsets, all_labels


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    tower = ItemTower().eval()
    values, offsets, labels = item_features(rank)
    all_values, all_offsets, all_labels = gather_batch(values, offsets, labels, world)
    with torch.no_grad():
        emb = tower(all_values, all_offsets)
    sims = emb @ emb.T
    sims.fill_diagonal_(-1.0)
    nn_idx = sims.topk(5, dim=1).indices
    purity = (all_labels[nn_idx] == all_labels[:, None]).float().mean()
    if rank == 0:
        print(f"item-tower neighbour label purity@5 over {emb.shape[0]} items: {purity.item():.3f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
