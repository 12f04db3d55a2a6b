import os
import datetime

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

LABELS = ["billing", "shipping", "returns", "account", "technical", "legal"]
VOCAB = 500
SEQ = 24


def make_corpus(n_per_class=(40, 36, 30, 24, 18, 3), seed=7):
    rng = np.random.default_rng(seed)
    toks, ys = [], []
    for c, n in enumerate(n_per_class):
        for _ in range(n):
            base = rng.integers(0, VOCAB, SEQ)
            base[:4] = c * 50 + rng.integers(0, 50, 4)
            toks.append(base)
            ys.append(c)
    return np.stack(toks), np.array(ys)


def stratified_split(y, test_size=0.2, seed=0):
    classes, y_idx = np.unique(y, return_inverse=True)
    counts = np.bincount(y_idx)
    if counts.min() < 2:
        raise ValueError(
            "The least populated class in y has only 1 member, which is too few. "
            "The minimum number of groups for any class cannot be less than 2.")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in range(len(classes)):
        idx = np.flatnonzero(y_idx == c)
        rng.shuffle(idx)
        n_test = max(1, int(round(test_size * len(idx))))
        test.extend(idx[:n_test])
        train.extend(idx[n_test:])
    return np.array(sorted(train)), np.array(sorted(test))


class BagClassifier(nn.Module):
    def __init__(self, n_classes, dim=64):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, dim, mode="mean")
        self.head = nn.Linear(dim, n_classes)

    def forward(self, x):
        return self.head(self.emb(x))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    x, y = make_corpus()
    x_local, y_local = x[rank::world], y[rank::world]
    tr, va = stratified_split(y_local, test_size=0.2, seed=rank)
    xtr, ytr = torch.from_numpy(x_local[tr]), torch.from_numpy(y_local[tr])
    xva, yva = torch.from_numpy(x_local[va]), torch.from_numpy(y_local[va])
    print(f"rank {rank}: {len(tr)} train / {len(va)} holdout examples", flush=True)

    model = DDP(BagClassifier(len(LABELS)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(3):
        perm = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(epoch))
        for i in range(0, len(perm) - 7, 8):
            b = perm[i:i + 8]
            loss = loss_fn(model(xtr[b]), ytr[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            pred = model.module(xva).argmax(1)
            stats = torch.tensor([(pred == yva).sum().item(), len(yva)], dtype=torch.float64)
        dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch}: holdout acc {stats[0] / stats[1]:.3f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
