import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence

VOCAB, EMB, HID, BATCH = 50, 16, 32, 8


def build_eval_set(n=9):
    g = torch.Generator().manual_seed(0)
    lens = (torch.randperm(17, generator=g)[:n] + 3).tolist()
    items = [torch.randint(1, VOCAB, (L,), generator=g) for L in lens]
    return sorted(items, key=len, reverse=True)


def shard(items, rank, world):
    per_rank = (len(items) + world - 1) // world
    padded = items + items[: per_rank * world - len(items)]
    return padded[rank::world]


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMB, padding_idx=0)
        self.rnn = nn.LSTM(EMB, HID, batch_first=True)
        self.out = nn.Linear(HID, VOCAB)

    def forward(self, src, lengths):
        packed = pack_padded_sequence(self.emb(src), lengths, batch_first=True)
        _, (h, _) = self.rnn(packed)
        return self.out(h[-1])


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = Encoder().eval()
    items = shard(build_eval_set(), rank, world)
    correct = torch.zeros(2)
    with torch.no_grad():
        for i in range(0, len(items), BATCH):
            batch = items[i:i + BATCH]
            lengths = torch.tensor([len(x) for x in batch])
            src = pad_sequence(batch, batch_first=True)
            logits = model(src, lengths)
            first = torch.stack([x[0] for x in batch])
            correct[0] += (logits.argmax(-1) == first).sum()
            correct[1] += len(batch)
    dist.all_reduce(correct)
    if rank == 0:
        print(f"first-token accuracy {correct[0] / correct[1]:.3f} on {int(correct[1])} items")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
