import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, SEQ = 200, 32, 16
BATCH, MICRO = 16, 4
STEPS = 10


class Stage0(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.zeros(SEQ, DIM))
        self.block = nn.TransformerEncoderLayer(DIM, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)

    def forward(self, ids):
        return self.block(self.embed(ids) + self.pos)


class Stage1(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.TransformerEncoderLayer(DIM, nhead=4, dim_feedforward=64, dropout=0.0)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, h):
        return self.head(self.block(h))


def run_stage0(model, opt, gen, peer):
    ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
    targets = ids[:, 1:].contiguous()
    dist.send(targets, dst=peer)
    outputs = []
    for mb in ids[:, :-1].chunk(BATCH // MICRO):
        h = model(mb)
        out = h.transpose(0, 1)
        dist.send(out, dst=peer)
        outputs.append(out)
    for out in outputs:
        grad = torch.empty(out.shape)
        dist.recv(grad, src=peer)
        out.backward(grad)
    opt.step()
    opt.zero_grad()


def run_stage1(model, opt, peer):
    targets = torch.empty(BATCH, SEQ, dtype=torch.long)
    dist.recv(targets, src=peer)
    inputs, losses = [], []
    for t in targets.chunk(BATCH // MICRO):
        h = torch.empty(SEQ, MICRO, DIM)
        dist.recv(h, src=peer)
        h.requires_grad_(True)
        logits = model(h)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), t.t().reshape(-1)) / (BATCH // MICRO)
        inputs.append(h)
        losses.append(loss)
    for h, loss in zip(inputs, losses):
        loss.backward()
        dist.send(h.grad, dst=peer)
    opt.step()
    opt.zero_grad()
    return sum(l.item() for l in losses)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 2:
        raise SystemExit(f"this pipeline has 2 stages, launch it on 2 ranks (got {world})")

    torch.manual_seed(rank)
    model = Stage0() if rank == 0 else Stage1()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(42)
    for step in range(STEPS):
        if rank == 0:
            run_stage0(model, opt, gen, peer=1)
        else:
            loss = run_stage1(model, opt, peer=0)
            print(f"step {step} loss {loss:.4f}", flush=True)
    dist.barrier()
    if rank == 1:
        print("pipeline training finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
