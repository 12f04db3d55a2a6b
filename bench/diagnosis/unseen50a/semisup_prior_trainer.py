import os
import math
import datetime

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

N_CLASSES = 5
VOCAB = 400
SEQ = 20
PRIOR_WEIGHT = 0.3


def build_dataset(n_labeled=96, n_unlabeled=96, seed=11):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, VOCAB, (n_labeled + n_unlabeled, SEQ), generator=g)
    y = torch.randint(0, N_CLASSES, (n_labeled + n_unlabeled,), generator=g)
    x[:, :3] = y[:, None] * 60 + torch.randint(0, 60, (len(y), 3), generator=g)
    y[n_labeled:] = -1
    return x, y


class TextClassifier(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, dim, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, N_CLASSES))

    def forward(self, x):
        return self.mlp(self.emb(x))


def prior_matching_loss(logits, unlabeled):
    probs = F.softmax(logits[unlabeled], dim=-1)
    mass = torch.cat([probs.sum(0), probs.new_tensor([float(len(probs))])])
    mass = dist_nn.all_reduce(mass)
    prior = mass[:-1] / mass[-1].clamp_min(1.0)
    return (prior * (prior.clamp_min(1e-8).log() + math.log(N_CLASSES))).sum()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    x, y = build_dataset()
    per_rank = len(x) // world
    xs, ys = x[rank * per_rank:(rank + 1) * per_rank], y[rank * per_rank:(rank + 1) * per_rank]
    print(f"rank {rank}: {(ys >= 0).sum().item()} labeled, {(ys < 0).sum().item()} unlabeled", flush=True)

    model = DDP(TextClassifier())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    bs = 16
    for epoch in range(2):
        order = torch.randperm(len(xs), generator=torch.Generator().manual_seed(epoch))
        for step, i in enumerate(range(0, len(order), bs)):
            b = order[i:i + bs]
            xb, yb = xs[b], ys[b]
            logits = model(xb)
            labeled, unlabeled = yb >= 0, yb < 0
            loss = logits.sum() * 0.0
            if labeled.any():
                loss = loss + F.cross_entropy(logits[labeled], yb[labeled])
            reg = prior_matching_loss(logits, unlabeled)
            if unlabeled.any():
                loss = loss + PRIOR_WEIGHT * reg
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0 and step % 3 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f} prior-kl {reg.item():.4f}", flush=True)

    with torch.no_grad():
        pred = model.module(xs).argmax(1)
        mask = ys >= 0
        acc = torch.tensor([(pred[mask] == ys[mask]).sum().item(), mask.sum().item()], dtype=torch.float64)
    dist.all_reduce(acc)
    if rank == 0:
        print(f"labeled accuracy {acc[0] / acc[1]:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
