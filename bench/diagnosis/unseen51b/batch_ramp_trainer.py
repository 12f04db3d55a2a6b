import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

RAMP_START, RAMP_INCREMENT, RAMP_FINAL = 8, 4, 32
RAMP_EVERY = 6
MICRO_BS = 2
TOTAL_STEPS = 30


def global_batch_size(step):
    stage = step // RAMP_EVERY
    return min(RAMP_FINAL, RAMP_START + stage * RAMP_INCREMENT)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    vocab, dim, seq = 64, 32, 12
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, vocab, (4096, seq + 1), generator=g)

    model = DDP(nn.Sequential(nn.Embedding(vocab, dim), nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, vocab)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    consumed = 0

    for step in range(TOTAL_STEPS):
        gbs = global_batch_size(step)
        local_bs = gbs // world
        start = consumed + rank * local_bs
        batch = tokens[start:start + local_bs]
        n_micro = local_bs // MICRO_BS
        micro = batch.view(n_micro, MICRO_BS, seq + 1)

        opt.zero_grad()
        total = 0.0
        for k in range(n_micro):
            inp, tgt = micro[k, :, :-1], micro[k, :, 1:]
            ctx = model.no_sync() if k < n_micro - 1 else torch.enable_grad()
            with ctx:
                logits = model(inp)
                loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), tgt.reshape(-1)) / n_micro
                loss.backward()
            total += loss.item()
        opt.step()
        consumed += gbs
        if rank == 0:
            print(f"step {step} global_bs {gbs} micro-batches/rank {n_micro} loss {total:.4f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
