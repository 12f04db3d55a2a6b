"""Sequence classifier trained with a length curriculum: sequences grow from 8 to 32 tokens over the epochs.

Launch: torchrun --nnodes 2 --nproc-per-node 1 ... persistent_workers_epoch.py
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

EPOCHS = 4
SCHEDULE = {0: 8, 1: 16, 2: 24, 3: 32}      # epoch -> sequence length
VOCAB = 64


class CurriculumTokens(Dataset):
    """Synthetic token sequences; the label is whether token 7 occurs. Length follows the curriculum."""

    def __init__(self, n=2048):
        g = torch.Generator().manual_seed(0)
        self.tokens = torch.randint(0, VOCAB, (n, 32), generator=g)
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, i):
        length = SCHEDULE[self.epoch]
        seq = self.tokens[i, :length]
        return seq, int((seq == 7).any())


class BagModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, 32, mode="mean")
        self.head = nn.Linear(32, 2)

    def forward(self, seq):
        return self.head(self.emb(seq))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(BagModel())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = CurriculumTokens()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True)
    loader = DataLoader(data, batch_size=64, sampler=sampler, num_workers=2, persistent_workers=True)

    longest = {}
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        data.set_epoch(epoch)
        seen = 0
        for seq, label in loader:
            seen = max(seen, seq.shape[1])
            loss = nn.functional.cross_entropy(model(seq), label)
            opt.zero_grad()
            loss.backward()
            opt.step()
        t = torch.tensor([seen])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        longest[epoch] = int(t)
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.3f}, longest sequence {longest[epoch]}", flush=True)

    wrong = {e: n for e, n in longest.items() if n != SCHEDULE[e]}
    dist.barrier()
    dist.destroy_process_group()
    if wrong:
        print(f"rank {rank}: curriculum check failed: longest sequence per epoch {longest}, schedule {SCHEDULE}",
              flush=True)
        raise SystemExit(1)
    print(f"rank {rank}: done", flush=True)


if __name__ == "__main__":
    main()
