import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, DIM, CTX = 256, 64, 32
MICRO_BATCH, ACCUM_STEPS, TRAIN_STEPS = 4, 4, 20


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.zeros(CTX, DIM))
        layer = nn.TransformerEncoderLayer(DIM, nhead=4, dim_feedforward=2 * DIM, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        x = self.tok(ids) + self.pos[: ids.size(1)]
        mask = nn.Transformer.generate_square_subsequent_mask(ids.size(1))
        return self.head(self.blocks(x, mask=mask, is_causal=True))


def batches(rank, seed=1234):
    g = torch.Generator().manual_seed(seed + rank)
    while True:
        ids = torch.randint(0, VOCAB, (MICRO_BATCH, CTX + 1), generator=g)
        yield ids[:, :-1], ids[:, 1:]


def lr_at(step, warmup=4, base=3e-4):
    if step < warmup:
        return base * (step + 1) / warmup
    return base * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (TRAIN_STEPS - warmup)))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    model = DDP(TinyLM(), static_graph=True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr_at(0), weight_decay=0.01)
    data = batches(rank)

    for step in range(TRAIN_STEPS):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        running = 0.0
        for micro in range(ACCUM_STEPS):
            x, y = next(data)
            last = micro == ACCUM_STEPS - 1
            if last:
                logits = model(x)
                loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1)) / ACCUM_STEPS
                loss.backward()
            else:
                with model.no_sync():
                    logits = model(x)
                    loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1)) / ACCUM_STEPS
                    loss.backward()
            running += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

        stat = torch.tensor([running])
        dist.all_reduce(stat)
        if rank == 0:
            print(f"step {step} lr {lr_at(step):.2e} loss {stat.item() / world:.4f}", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), "tinylm.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
