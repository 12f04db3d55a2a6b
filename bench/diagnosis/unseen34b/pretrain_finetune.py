import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, DIM, CLASSES = 64, 32, 5


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Sequential(nn.Linear(DIM, DIM), nn.GELU(), nn.Linear(DIM, DIM))

    def forward(self, tokens):
        return self.mix(self.embed(tokens)).mean(dim=1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        return self.head(self.encoder(tokens))


def batches(rank, phase, n):
    g = torch.Generator().manual_seed(1000 * phase + rank)
    for _ in range(n):
        tokens = torch.randint(0, VOCAB, (16, 12), generator=g)
        if phase == 0:
            target = tokens[:, -1]
        else:
            target = tokens.sum(dim=1) % CLASSES
        yield tokens, target


def run_phase(name, ddp, opt, rank, phase, steps):
    for step, (tokens, target) in enumerate(batches(rank, phase, steps)):
        loss = nn.functional.cross_entropy(ddp(tokens), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"[{name}] step {step} loss {loss.item():.4f}", flush=True)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Model()
    ddp = DDP(model)

    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3)
    run_phase("pretrain", ddp, opt, rank, phase=0, steps=30)
    dist.barrier()

    model.head = nn.Linear(DIM, CLASSES)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    run_phase("finetune", ddp, opt, rank, phase=1, steps=30)

    dist.barrier()
    if rank == 0:
        print("pretrain + finetune finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
