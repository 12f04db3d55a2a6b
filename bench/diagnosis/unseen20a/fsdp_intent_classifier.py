import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

VOCAB, DIM, CLASSES, SEQ = 512, 64, 8, 24
BATCH, STEPS, MAX_GRAD_NORM = 8, 12, 1.0


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.ff(self.norm(x))


class IntentClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList([Block(DIM) for _ in range(3)])
        self.pool_norm = nn.LayerNorm(DIM)
        self.classifier = nn.Linear(DIM, CLASSES)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.classifier(self.pool_norm(x.mean(dim=1)))


def synthetic_batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    labels = ids[:, 0] % CLASSES
    return ids, labels


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)

    model = IntentClassifier()
    for block in model.blocks:
        fully_shard(block)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=4)

    skipped = 0
    for step in range(STEPS):
        ids, labels = synthetic_batch(step, rank)
        loss = F.cross_entropy(model(ids), labels)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        if not torch.isfinite(grad_norm):
            skipped += 1
            opt.zero_grad(set_to_none=True)
            continue
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

        stats = torch.tensor([loss.item(), float(grad_norm)])
        dist.all_reduce(stats, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step} loss {stats[0]:.4f} grad_norm {stats[1]:.3f} lr {sched.get_last_lr()[0]:.2e}", flush=True)

    if rank == 0:
        print(f"done, skipped {skipped} steps", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
