"""Evaluate a text classifier over a streamed shard list; gather per-example predictions into one report."""
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

VOCAB, CLASSES, MAX_LEN = 1000, 5, 48
SHARDS = [f"eval-{i:03d}.jsonl" for i in range(8)]
PER_SHARD = 40


def read_shard(name):
    idx = int(name[5:8])
    g = torch.Generator().manual_seed(1000 + idx)
    for j in range(PER_SHARD):
        ln = int(torch.randint(8, MAX_LEN, (1,), generator=g))
        toks = torch.randint(1, VOCAB, (ln,), generator=g)
        yield {"id": idx * PER_SHARD + j, "tokens": toks, "label": int(toks.sum()) % CLASSES}


class StreamingEvalSet(IterableDataset):
    def __init__(self, shards):
        self.shards = shards

    def __iter__(self):
        info = get_worker_info()
        shards = self.shards if info is None else self.shards[info.id::info.num_workers]
        for name in shards:
            yield from read_shard(name)


def collate(batch):
    toks = torch.zeros(len(batch), MAX_LEN, dtype=torch.long)
    for i, ex in enumerate(batch):
        toks[i, :len(ex["tokens"])] = ex["tokens"]
    ids = torch.tensor([ex["id"] for ex in batch])
    labels = torch.tensor([ex["label"] for ex in batch])
    return ids, toks, labels


class BagClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, 64, mode="mean", padding_idx=0)
        self.head = nn.Linear(64, CLASSES)

    def forward(self, toks):
        return self.head(self.emb(toks))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = BagClassifier().eval()
    loader = DataLoader(StreamingEvalSet(SHARDS), batch_size=16, num_workers=2, collate_fn=collate)
    rows = []
    with torch.no_grad():
        for ids, toks, labels in loader:
            pred = model(toks).argmax(1)
            rows.append(torch.stack([ids, pred, labels], dim=1))
    local = torch.cat(rows)
    counts = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
    dist.all_gather(counts, torch.tensor([local.shape[0]]))
    biggest = int(max(c.item() for c in counts))
    padded = torch.full((biggest, 3), -1, dtype=torch.long)
    padded[: local.shape[0]] = local
    gathered = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded)
    if rank == 0:
        table = torch.cat([g[: int(c)] for g, c in zip(gathered, counts)])
        expected = len(SHARDS) * PER_SHARD
        if table.shape[0] != expected or table[:, 0].unique().numel() != expected:
            raise RuntimeError(f"prediction table has {table.shape[0]} rows for {expected} examples")
        acc = (table[:, 1] == table[:, 2]).float().mean().item()
        with open("eval_report.json", "w") as fh:
            json.dump({"examples": expected, "accuracy": acc}, fh)
        print(f"accuracy {acc:.4f} over {expected} examples", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
