import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
VOCAB = 200
PAD_LEN = 24


def eval_set(n=32, seed=11):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.randint(5, 10) if i < n // 2 else rng.randint(12, 20)
        toks = [rng.randint(1, VOCAB - 1) for _ in range(length)]
        tags = [rng.randrange(len(LABELS)) for _ in range(length)]
        out.append((toks, tags))
    return out


class BiLSTMTagger(nn.Module):
    def __init__(self, dim=32, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim, padding_idx=0)
        self.lstm = nn.LSTM(dim, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, len(LABELS))

    def forward(self, x, lengths):
        packed = pack_padded_sequence(self.emb(x), lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = pad_packed_sequence(h, batch_first=True)
        return self.out(h)


def collate(items):
    x = torch.zeros(len(items), PAD_LEN, dtype=torch.long)
    y = torch.full((len(items), PAD_LEN), -100, dtype=torch.long)
    lengths = torch.tensor([len(t) for t, _ in items])
    for i, (toks, tags) in enumerate(items):
        x[i, :len(toks)] = torch.tensor(toks)
        y[i, :len(tags)] = torch.tensor(tags)
    return x, y, lengths


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = BiLSTMTagger().eval()
    data = eval_set()
    per = len(data) // world
    x, y, lengths = collate(data[rank * per:(rank + 1) * per])

    with torch.no_grad():
        logits = model(x, lengths)
    preds = logits.argmax(-1)
    gold = y[:, :preds.size(1)]

    all_preds = [torch.empty_like(preds) for _ in range(world)]
    all_gold = [torch.empty_like(gold) for _ in range(world)]
    dist.all_gather(all_preds, preds)
    dist.all_gather(all_gold, gold)

    if rank == 0:
        p = torch.cat([t.flatten() for t in all_preds])
        g = torch.cat([t.flatten() for t in all_gold])
        mask = g != -100
        acc = (p[mask] == g[mask]).float().mean().item()
        ent = mask & (g != 0)
        recall = (p[ent] == g[ent]).float().mean().item()
        print(f"token accuracy {acc:.4f} entity-token recall {recall:.4f} over {int(mask.sum())} tokens", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
