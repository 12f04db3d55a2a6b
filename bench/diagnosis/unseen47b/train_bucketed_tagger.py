"""Sequence tagger trained with length-bucketed batches and a host-side prefetcher."""
import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, Sampler

VOCAB, TAGS, BATCH, EPOCHS = 500, 9, 8, 2


class TaggingCorpus(Dataset):
    def __init__(self, n=384, seed=7):
        g = torch.Generator().manual_seed(seed)
        self.lengths = torch.randint(5, 60, (n,), generator=g).tolist()
        self.items = []
        for ln in self.lengths:
            toks = torch.randint(1, VOCAB, (ln,), generator=g)
            self.items.append((toks, toks % TAGS))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class BucketBatchSampler(Sampler):
    def __init__(self, lengths, batch_size, rank, world, seed=0):
        self.lengths, self.batch_size = lengths, batch_size
        self.rank, self.world, self.seed, self.epoch = rank, world, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _batches(self):
        order = sorted(range(len(self.lengths)), key=lambda i: self.lengths[i])
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        random.Random(self.seed + self.epoch).shuffle(batches)
        return batches

    def __iter__(self):
        return iter(self._batches()[self.rank::self.world])

    def __len__(self):
        return len(self._batches())


def pad_collate(batch):
    n = max(len(t) for t, _ in batch)
    toks = torch.zeros(len(batch), n, dtype=torch.long)
    tags = torch.full((len(batch), n), -100, dtype=torch.long)
    for i, (t, y) in enumerate(batch):
        toks[i, :len(t)], tags[i, :len(y)] = t, y
    return toks, tags


class Prefetcher:
    def __init__(self, loader):
        self.it = iter(loader)
        self.pending = next(self.it)

    def next(self):
        batch = self.pending
        self.pending = next(self.it, None)
        if batch is None:
            raise RuntimeError("prefetcher ran out of batches")
        return batch


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 32, padding_idx=0)
        self.rnn = nn.GRU(32, 32, batch_first=True)
        self.out = nn.Linear(32, TAGS)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    ds = TaggingCorpus()
    sampler = BucketBatchSampler(ds.lengths, BATCH, rank, world)
    loader = DataLoader(ds, batch_sampler=sampler, collate_fn=pad_collate)
    steps_per_epoch = len(loader)
    model = DDP(Tagger())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=EPOCHS * steps_per_epoch)
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        pf = Prefetcher(loader)
        total = 0.0
        for step in range(steps_per_epoch):
            toks, tags = pf.next()
            loss = loss_fn(model(toks).reshape(-1, TAGS), tags.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
        if rank == 0:
            print(f"epoch {epoch} steps {steps_per_epoch} loss {total / steps_per_epoch:.4f}", flush=True)
    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
