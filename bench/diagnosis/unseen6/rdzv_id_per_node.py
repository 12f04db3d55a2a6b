"""Character-level language model trained with DDP; started with torchrun on each machine, one worker per
core group. Reads RANK/WORLD_SIZE/LOCAL_RANK from torchrun."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

TEXT = ("the quick brown fox jumps over the lazy dog while the five boxing wizards jump quickly " * 40)
CHARS = sorted(set(TEXT))


class CharLM(nn.Module):
    def __init__(self, vocab, dim=48):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.LSTM(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        return self.out(h)


def windows(rank, world, length=32, batch=16, steps=25):
    ids = torch.tensor([CHARS.index(c) for c in TEXT])
    starts = torch.arange(rank, len(ids) - length - 1, world)
    g = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        pick = starts[torch.randint(len(starts), (batch,), generator=g)]
        x = torch.stack([ids[s:s + length] for s in pick])
        y = torch.stack([ids[s + 1:s + length + 1] for s in pick])
        yield x, y


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"worker {rank}/{world} (local {os.environ['LOCAL_RANK']}) on {os.uname().nodename}", flush=True)
    torch.manual_seed(0)
    model = DDP(CharLM(len(CHARS)))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step, (x, y) in enumerate(windows(rank, world)):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x).reshape(-1, len(CHARS)), y.reshape(-1))
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
