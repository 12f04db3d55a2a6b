"""Extractive-QA evaluation across ranks. The eval set is split round-robin and padded so every
rank runs the same number of batches; padded duplicates are removed by example id after gathering."""
import os
import datetime
import json

import torch
import torch.nn as nn
import torch.distributed as dist

N_EXAMPLES = 101
SEQ = 24
HIDDEN = 16
BATCH = 8


def load_examples():
    g = torch.Generator().manual_seed(3)
    examples = []
    for i in range(N_EXAMPLES):
        tokens = torch.randint(0, 50, (SEQ,), generator=g)
        start = int(torch.randint(0, SEQ - 4, (1,), generator=g))
        examples.append({"id": f"{0x5a3f00 + 37 * i:x}", "tokens": tokens,
                         "start": start, "end": start + 3})
    return examples


class SpanHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, HIDDEN)
        self.out = nn.Linear(HIDDEN, 2)

    def forward(self, tokens):
        logits = self.out(self.emb(tokens))
        return logits[..., 0].argmax(-1), logits[..., 1].argmax(-1)


def shard(examples, rank, world):
    per_rank = -(-len(examples) // world)
    idx = list(range(rank, len(examples), world))
    idx += idx[: per_rank - len(idx)]
    return [examples[i] for i in idx]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = SpanHead().eval()

    mine = shard(load_examples(), rank, world)
    ids, exact = [], []
    with torch.no_grad():
        for b in range(0, len(mine), BATCH):
            batch = mine[b:b + BATCH]
            s, e = model(torch.stack([ex["tokens"] for ex in batch]))
            for ex, ps, pe in zip(batch, s.tolist(), e.tolist()):
                ids.append(ex["id"])
                exact.append(float(ps == ex["start"] and pe == ex["end"]))

    if world > 1:
        id_t = torch.tensor(ids)
        em_t = torch.tensor(exact)
        all_ids = [torch.empty_like(id_t) for _ in range(world)]
        all_em = [torch.empty_like(em_t) for _ in range(world)]
        dist.all_gather(all_ids, id_t)
        dist.all_gather(all_em, em_t)
        seen = {}
        for i_t, e_t in zip(all_ids, all_em):
            for i, e in zip(i_t.tolist(), e_t.tolist()):
                seen.setdefault(i, e)
        scores = list(seen.values())
    else:
        scores = exact

    if rank == 0:
        result = {"examples": len(scores), "exact_match": sum(scores) / len(scores)}
        with open("qa_eval.json", "w") as f:
            json.dump(result, f)
        print(result)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
