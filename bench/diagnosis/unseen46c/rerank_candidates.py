"""Score retrieval candidates with a small cross-encoder, sharded over ranks.

The manifest is column-oriented (ids, token lists, precomputed lengths); requests are
sorted by length so batches pad little, and dealt to ranks in a strided order so that
every rank gets a similar mix of long and short requests. Scores are gathered and written
back in the manifest's order by rank 0.
"""
import datetime
import json
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB, DIM, PAD = 300, 32, 0


def build_manifest(n=40):
    rng = np.random.default_rng(5)
    lengths = rng.integers(4, 30, size=n)
    tokens = [rng.integers(1, VOCAB, size=int(L)).tolist() for L in lengths]
    order = np.argsort(-lengths, kind="stable")
    return {"ids": [int(i) for i in order],
            "tokens": [tokens[i] for i in order],
            "lengths": [int(lengths[i]) for i in order]}


class CrossEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM, padding_idx=PAD)
        self.proj = nn.Linear(DIM, 1)

    def forward(self, ids, mask):
        h = self.emb(ids) * mask.unsqueeze(-1)
        return self.proj(h.sum(1) / mask.sum(1, keepdim=True)).squeeze(-1)


def collate(tok_lists, lengths):
    width = int(max(lengths))
    ids = torch.full((len(tok_lists), width), PAD, dtype=torch.long)
    mask = torch.zeros(len(tok_lists), width)
    for i, (toks, n) in enumerate(zip(tok_lists, lengths)):
        ids[i, :n] = torch.tensor(toks)
        mask[i, :n] = 1.0
    return ids, mask


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    m = build_manifest()
    my_ids = m["ids"][rank::world]
    my_tokens = m["tokens"][rank::world]
    my_lengths = np.array_split(np.asarray(m["lengths"]), world)[rank]

    torch.manual_seed(0)
    model = CrossEncoder().eval()
    scores = []
    with torch.no_grad():
        for s in range(0, len(my_ids), 8):
            ids, mask = collate(my_tokens[s:s + 8], my_lengths[s:s + 8])
            scores.extend(model(ids, mask).tolist())

    gathered = [None] * world
    dist.all_gather_object(gathered, list(zip(my_ids, scores)))
    if rank == 0:
        merged = dict(pair for part in gathered for pair in part)
        out = [merged[i] for i in range(len(m["ids"]))]
        with open("rerank_scores.json", "w") as f:
            json.dump(out, f)
        print(json.dumps({"scored": len(out), "world": world}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
