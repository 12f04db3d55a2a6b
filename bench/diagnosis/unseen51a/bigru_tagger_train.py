import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

N_LABELS = 5
VOCAB = 300


def load_sentences(n=31, seed=5):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(3, 12)
        out.append({"tokens": [rng.randint(1, VOCAB - 1) for _ in range(k)],
                    "tags": [rng.randrange(N_LABELS) for _ in range(k)]})
    return out


def shard_for(records, rank, world):
    records = list(records)
    while len(records) % world:
        records.append({"tokens": [], "tags": []})
    return records[rank::world]


class BiGRUTagger(nn.Module):
    def __init__(self, dim=32, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim, padding_idx=0)
        self.gru = nn.GRU(dim, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, N_LABELS)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(self.emb(x), lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.gru(packed)
        h, _ = pad_packed_sequence(h, batch_first=True, total_length=x.size(1))
        return self.head(h)


def batches(records, size):
    for i in range(0, len(records), size):
        chunk = records[i:i + size]
        x = pad_sequence([torch.tensor(r["tokens"], dtype=torch.long) for r in chunk], batch_first=True)
        y = pad_sequence([torch.tensor(r["tags"], dtype=torch.long) for r in chunk], batch_first=True,
                         padding_value=-100)
        lengths = torch.tensor([len(r["tokens"]) for r in chunk])
        yield x, y, lengths


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    records = shard_for(load_sentences(), rank, world)
    model = DDP(BiGRUTagger())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)

    for epoch in range(3):
        seen = 0
        total = torch.zeros(2)
        for x, y, lengths in batches(records, 4):
            opt.zero_grad()
            logits = model(x, lengths)
            loss = loss_fn(logits.reshape(-1, N_LABELS), y.reshape(-1))
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(lengths), float(len(lengths))])
            seen += len(lengths)
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: loss {total[0] / total[1]:.4f} over {int(total[1])} sentences", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
