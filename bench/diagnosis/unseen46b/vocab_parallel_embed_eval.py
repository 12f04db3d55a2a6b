"""Evaluate a checkpointed embedding bag classifier whose token table is split by vocabulary range over ranks."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

BASE_VOCAB = 32000
SPECIALS = ["<pad>"]
VOCAB = BASE_VOCAB + len(SPECIALS)
PAD_ID = BASE_VOCAB
DIM = 32
SEQ = 48
BATCH = 8


class ShardedEmbedding(nn.Module):
    """Rows [start, end) of the token table live on this rank; outputs are summed across ranks."""

    def __init__(self, vocab, dim, rank, world, padding_idx=None):
        super().__init__()
        per = (vocab + world - 1) // world
        self.start = rank * per
        self.end = min(vocab, self.start + per)
        self.table = nn.Embedding(self.end - self.start, dim, padding_idx=padding_idx)

    def forward(self, ids):
        outside = (ids < self.start) | (ids >= self.end)
        local = (ids - self.start).masked_fill(outside, 0)
        out = self.table(local).masked_fill(outside.unsqueeze(-1), 0.0)
        dist.all_reduce(out)
        return out


class Classifier(nn.Module):
    def __init__(self, rank, world):
        super().__init__()
        self.embed = ShardedEmbedding(VOCAB, DIM, rank, world, padding_idx=PAD_ID)
        self.proj = nn.Linear(DIM, 4)

    def forward(self, ids):
        keep = (ids != PAD_ID).unsqueeze(-1).float()
        pooled = (self.embed(ids) * keep).sum(1) / keep.sum(1).clamp(min=1)
        return self.proj(pooled)


def make_batch(seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, BASE_VOCAB, (BATCH, SEQ), generator=g)
    lengths = torch.randint(8, SEQ + 1, (BATCH,), generator=g)
    ids[torch.arange(SEQ)[None, :] >= lengths[:, None]] = PAD_ID
    labels = torch.randint(0, 4, (BATCH,), generator=g)
    return ids, labels


@torch.no_grad()
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = Classifier(rank, world).eval()
    correct = torch.zeros(2)
    for i in range(5):
        ids, labels = make_batch(i)
        pred = model(ids).argmax(-1)
        correct += torch.tensor([(pred == labels).sum().item(), labels.numel()], dtype=torch.float)
    if rank == 0:
        print(f"eval accuracy {correct[0] / correct[1]:.3f} over {int(correct[1])} examples", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
