"""Multi-task (intent + slot + sentiment) trainer. The loss of each task is
normalised by that task's number of labelled examples across all workers so
that every example has the same weight whatever worker it lands on.
Validation runs on the main process every few steps."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

TASKS = {"intent": 7, "slot": 15, "sentiment": 3}
STEPS, VAL_EVERY = 12, 4


class GloballyNormalisedLoss(nn.Module):
    def forward(self, logits, labels):
        sums, counts = [], []
        for t in TASKS:
            mask = labels[t] >= 0
            sums.append(F.cross_entropy(logits[t][mask], labels[t][mask], reduction="sum"))
            counts.append(mask.sum())
        counts = torch.stack(counts).float()
        if self.training and dist.is_initialized():
            dist.all_reduce(counts)
            counts = counts / dist.get_world_size()
        return {t: s / counts[i].clamp(min=1) for i, (t, s) in enumerate(zip(TASKS, sums))}


class MultiTaskEncoder(nn.Module):
    def __init__(self, vocab=400, width=64):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, width, mode="mean")
        self.encoder = nn.Sequential(nn.Linear(width, width), nn.Tanh())
        self.heads = nn.ModuleDict({t: nn.Linear(width, n) for t, n in TASKS.items()})
        self.criterion = GloballyNormalisedLoss()

    def forward(self, tokens, labels):
        h = self.encoder(self.embed(tokens))
        logits = {t: head(h) for t, head in self.heads.items()}
        return self.criterion(logits, labels)


def make_batch(gen, n=32):
    tokens = torch.randint(0, 400, (n, 20), generator=gen)
    labels = {}
    for t, k in TASKS.items():
        y = torch.randint(0, k, (n,), generator=gen)
        y[torch.rand(n, generator=gen) < 0.3] = -1
        labels[t] = y
    return tokens, labels


def validate(model, gen, batches=3):
    model.eval()
    totals = {t: 0.0 for t in TASKS}
    with torch.no_grad():
        for _ in range(batches):
            tokens, labels = make_batch(gen)
            for t, v in model(tokens, labels).items():
                totals[t] += v.item() / batches
    return totals


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(MultiTaskEncoder())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(50 + rank)
    val_gen = torch.Generator().manual_seed(999)

    model.train()
    for step in range(1, STEPS + 1):
        tokens, labels = make_batch(gen)
        losses = model(tokens, labels)
        loss = sum(losses.values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if step % VAL_EVERY == 0 and rank == 0:
            val = validate(model.module, val_gen)
            print("val " + " ".join(f"{t}={v:.3f}" for t, v in val.items()), flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
