import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 500
HIDDEN = 32
NUM_EXPERTS = 4
CAPACITY_FACTOR = 1.25
PAD = 0
STEPS = 30


class AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.contiguous())
        return out

    @staticmethod
    def backward(ctx, grad):
        out = torch.empty_like(grad)
        dist.all_to_all_single(out, grad.contiguous())
        return out


class SwitchFFN(nn.Module):
    def __init__(self, ws):
        super().__init__()
        self.ws = ws
        self.n_local = NUM_EXPERTS // ws
        self.router = nn.Linear(HIDDEN, NUM_EXPERTS, bias=False)
        self.w1 = nn.Parameter(torch.randn(self.n_local, HIDDEN, 4 * HIDDEN) * 0.05)
        self.w2 = nn.Parameter(torch.randn(self.n_local, 4 * HIDDEN, HIDDEN) * 0.05)

    def forward(self, x):
        n = x.shape[0]
        capacity = math.ceil(CAPACITY_FACTOR * n / NUM_EXPERTS)
        probs = F.softmax(self.router(x), dim=-1)
        gate, eid = probs.max(-1)
        onehot = F.one_hot(eid, NUM_EXPERTS)
        pos = (onehot.cumsum(0) - 1)[torch.arange(n), eid]
        keep = pos < capacity
        buf = x.new_zeros(NUM_EXPERTS, capacity, HIDDEN)
        buf = buf.index_put((eid[keep], pos[keep]), x[keep])
        buf = AllToAll.apply(buf.view(self.ws, -1, HIDDEN))
        buf = buf.view(self.ws, self.n_local, capacity, HIDDEN).transpose(0, 1).reshape(self.n_local, -1, HIDDEN)
        h = torch.bmm(F.gelu(torch.bmm(buf, self.w1)), self.w2)
        h = h.view(self.n_local, self.ws, capacity, HIDDEN).transpose(0, 1).reshape(self.ws, -1, HIDDEN)
        h = AllToAll.apply(h).view(NUM_EXPERTS, capacity, HIDDEN)
        y = torch.zeros_like(x)
        y = y.index_put((keep.nonzero().squeeze(1),), h[eid[keep], pos[keep]])
        frac = onehot.float().mean(0)
        aux = NUM_EXPERTS * (frac * probs.mean(0)).sum()
        return y * gate.unsqueeze(1), aux


def packed_batch(gen, batch=4):
    lengths = torch.randint(12, 120, (batch,), generator=gen)
    ids = torch.full((batch, int(lengths.max())), PAD)
    for i, L in enumerate(lengths.tolist()):
        ids[i, :L] = torch.randint(1, VOCAB, (L,), generator=gen)
    return ids


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, ws = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    embed = nn.Embedding(VOCAB, HIDDEN)
    head = nn.Linear(HIDDEN, VOCAB)
    moe = SwitchFFN(ws)
    for p in list(embed.parameters()) + list(head.parameters()) + [moe.router.weight]:
        dist.broadcast(p.data, src=0)
    dense = list(embed.parameters()) + list(head.parameters()) + [moe.router.weight]
    opt = torch.optim.AdamW(dense + [moe.w1, moe.w2], lr=3e-4)
    gen = torch.Generator().manual_seed(2024 + rank)

    for step in range(STEPS):
        ids = packed_batch(gen)
        mask = ids[:, :-1] != PAD
        inputs, labels = ids[:, :-1][mask], ids[:, 1:][mask]
        h = embed(inputs)
        out, aux = moe(h)
        logits = head(h + out)
        loss = F.cross_entropy(logits, labels) + 0.01 * aux
        opt.zero_grad()
        loss.backward()
        for p in dense:
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        if rank == 0:
            print(f"step {step} tokens {inputs.shape[0]} loss {loss.item():.3f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
