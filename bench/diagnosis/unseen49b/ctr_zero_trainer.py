"""Click-through-rate model (hashed features -> EmbeddingBag -> logistic head).

Trained with DDP and ZeroRedundancyOptimizer under a warmup/cosine schedule.
"""
import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

BUCKETS = 4096
DIM = 16
WARMUP = 5
TOTAL = 40
BASE_LR = 0.05


class CTRModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(BUCKETS, DIM, mode="mean")
        self.out = nn.Linear(DIM, 1)

    def forward(self, ids, offsets):
        return self.out(self.emb(ids, offsets)).squeeze(-1)


def optimizer_step(opt):
    local = opt.optim
    first = local.param_groups[0]["params"][0]
    state = local.state.get(first, {})
    return int(state["step"]) if "step" in state else 0


def lr_at(step):
    if step < WARMUP:
        return BASE_LR * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, TOTAL - WARMUP)
    return BASE_LR * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_batch(gen, batch=64, feats=6):
    ids = torch.randint(0, BUCKETS, (batch * feats,), generator=gen)
    offsets = torch.arange(0, batch * feats, feats)
    labels = ((ids.view(batch, feats) % 7 == 0).sum(1) > 0).float()
    return ids, offsets, labels


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(CTRModel())
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,
                                  lr=BASE_LR, weight_decay=0.0)
    gen = torch.Generator().manual_seed(100 + rank)
    for it in range(TOTAL):
        lr = lr_at(optimizer_step(opt))
        for group in opt.param_groups:
            group["lr"] = lr
        ids, offsets, labels = make_batch(gen)
        loss = F.binary_cross_entropy_with_logits(model(ids, offsets), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and it % 10 == 0:
            print(f"iter {it} lr {lr:.4f} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
