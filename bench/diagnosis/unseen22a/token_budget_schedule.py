"""Plan the LR schedule of a pretraining run from the token counts of the shard indexes, then train."""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

SEQ_LEN = 1024
MICRO_BATCH = 4
EPOCHS = 1
DOCS_PER_SHARD = 620_000


def read_index(shard_id):
    # a Megatron-style .idx: document lengths (in tokens), one entry per document
    rng = np.random.default_rng(100 + shard_id)
    sizes = rng.integers(200, 1800, size=DOCS_PER_SHARD).astype(np.int32)
    return sizes


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    sizes = read_index(rank)
    counts = torch.zeros(2, dtype=torch.from_numpy(sizes).dtype)
    counts[0] = len(sizes)
    counts[1] = int(sizes.sum())
    print(f"rank {rank}: shard {rank} has {int(counts[0])} docs, {int(counts[1]):,} tokens", flush=True)
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    total_docs, total_tokens = int(counts[0]), int(counts[1])

    tokens_per_step = SEQ_LEN * MICRO_BATCH * world
    total_steps = EPOCHS * total_tokens // tokens_per_step
    warmup = max(1, total_steps // 100)
    if rank == 0:
        print(f"corpus: {total_docs:,} docs, {total_tokens:,} tokens -> {total_steps:,} steps, "
              f"{warmup} warmup", flush=True)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Embedding(1024, 64), nn.Linear(64, 1024)))
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=6e-4, total_steps=total_steps,
                                                pct_start=warmup / total_steps, anneal_strategy="cos")

    g = torch.Generator().manual_seed(rank)
    for step in range(10):
        x = torch.randint(0, 1024, (MICRO_BATCH, 32), generator=g)
        logits = model(x[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 1024), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if rank == 0:
            print(f"step {step} lr {sched.get_last_lr()[0]:.2e} loss {loss.item():.3f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
