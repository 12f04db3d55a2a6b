import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 64


def synthetic_lengths(seed=7, n=2000):
    rng = np.random.default_rng(seed)
    return rng.integers(16, 180, size=n)


def choose_pack_length(lengths, multiple=32):
    p95 = int(np.percentile(lengths, 95))
    return ((p95 + multiple - 1) // multiple) * multiple


class TinyLM(nn.Module):
    def __init__(self, vocab, dim, max_len):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.block = nn.TransformerEncoderLayer(dim, 4, dim * 2, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, x):
        t = torch.arange(x.size(1))
        h = self.tok(x) + self.pos(t)[None]
        mask = nn.Transformer.generate_square_subsequent_mask(x.size(1))
        return self.head(self.block(h, src_mask=mask, is_causal=True))


def packed_batches(pack_len, batch, steps, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        yield torch.randint(0, VOCAB, (batch, pack_len + 1), generator=g)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        pack_len = choose_pack_length(synthetic_lengths())
        os.environ["PACK_LEN"] = str(pack_len)
        print(f"packing sequences to {pack_len} tokens", flush=True)
    dist.barrier()
    pack_len = int(os.environ.get("PACK_LEN", "128"))
    torch.manual_seed(0)
    model = DDP(TinyLM(VOCAB, 32, pack_len))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for step, seq in enumerate(packed_batches(pack_len, 4, 5, seed=rank)):
        x, y = seq[:, :-1], seq[:, 1:]
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
