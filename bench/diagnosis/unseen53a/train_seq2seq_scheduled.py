import os
import datetime
import random
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils.rnn import pad_sequence

VOCAB, EMB, HID, BOS, PAD = 30, 16, 32, 1, 0


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMB, padding_idx=PAD)
        self.enc = nn.GRU(EMB, HID, batch_first=True)
        self.cell = nn.GRUCell(EMB, HID)
        self.out = nn.Linear(HID, VOCAB)

    def forward(self, src, tgt, steps, tf_ratio):
        _, h = self.enc(self.emb(src))
        h = h[0]
        inp = torch.full((src.size(0),), BOS, dtype=torch.long)
        logits = []
        for t in range(steps):
            h = self.cell(self.emb(inp), h)
            step_logits = self.out(h)
            logits.append(step_logits)
            inp = tgt[:, t] if random.random() < tf_ratio else step_logits.argmax(-1)
        return torch.stack(logits, 1)


def make_shard(rank, n=6):
    g = torch.Generator().manual_seed(100 + rank)
    pairs = []
    for _ in range(n):
        L = int(torch.randint(4 + 4 * rank, 8 + 4 * rank, (1,), generator=g))
        s = torch.randint(2, VOCAB, (L,), generator=g)
        pairs.append((s, s.flip(0)))
    return pairs


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    random.seed(0)
    model = DDP(Seq2Seq())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pairs = make_shard(rank)
    for epoch in range(2):
        src = pad_sequence([p[0] for p in pairs], batch_first=True, padding_value=PAD)
        tgt = pad_sequence([p[1] for p in pairs], batch_first=True, padding_value=PAD)
        steps = torch.tensor(tgt.size(1))
        dist.all_reduce(steps, op=dist.ReduceOp.MAX)
        tf_ratio = max(0.0, 1.0 - 0.3 * epoch)
        logits = model(src, tgt, int(steps), tf_ratio)
        target = F.pad(tgt, (0, logits.size(1) - tgt.size(1)), value=PAD)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"epoch {epoch} steps {int(steps)} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
