import os
import datetime

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

VOCAB = 256
HIDDEN = 48
SEQ = 24
MICRO_BATCH = 8
MICRO_BATCHES = 4
STEPS = 20


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(HIDDEN)
        self.attn = nn.MultiheadAttention(HIDDEN, 4, batch_first=True)
        self.norm2 = nn.LayerNorm(HIDDEN)
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(), nn.Linear(4 * HIDDEN, HIDDEN))

    def forward(self, x):
        mask = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), 1)
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class FirstStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, HIDDEN))
        self.blocks = nn.Sequential(Block(), Block())

    def forward(self, tokens):
        return self.blocks(self.embed(tokens) + self.pos)


class LastStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.norm = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, x):
        return self.lm_head(self.norm(self.blocks(x)))


def token_batches(step):
    g = torch.Generator().manual_seed(step)
    data = torch.randint(0, VOCAB, (MICRO_BATCHES * MICRO_BATCH, SEQ + 1), generator=g)
    return data.chunk(MICRO_BATCHES)


def run_first_stage(model, opt):
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        for mb in token_batches(step):
            out = model(mb[:, :-1])
            dist.send(out.detach().reshape(MICRO_BATCH, -1).contiguous(), dst=1)
            grad = torch.empty(MICRO_BATCH, SEQ * HIDDEN)
            dist.recv(grad, src=1)
            out.backward(grad.view_as(out))
        opt.step()


def run_last_stage(model, opt):
    recv_buf = torch.empty(MICRO_BATCH, SEQ * HIDDEN)
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for mb in token_batches(step):
            dist.recv(recv_buf, src=0)
            act = recv_buf.requires_grad_().view(MICRO_BATCH, SEQ, HIDDEN)
            logits = model(act)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), mb[:, 1:].reshape(-1)) / MICRO_BATCHES
            loss.backward()
            dist.send(act.grad.reshape(MICRO_BATCH, -1).contiguous(), dst=0)
            total += loss.item()
        opt.step()
        if step % 5 == 0:
            print(f"step {step}: loss {total:.4f}", flush=True)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 2:
        raise SystemExit(f"this pipeline has 2 stages, launch it with 2 ranks (got {world})")
    torch.manual_seed(rank)
    model = FirstStage() if rank == 0 else LastStage()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    print(f"[rank {rank}] stage {rank}: {sum(p.numel() for p in model.parameters())} parameters", flush=True)
    if rank == 0:
        run_first_stage(model, opt)
    else:
        run_last_stage(model, opt)
    dist.barrier()
    torch.save(model.state_dict(), f"stage{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
