import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dnnf
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, HIDDEN = 256, 32, 64
EXPERTS_PER_RANK = 2
CAPACITY_FACTOR = 1.25
STEPS = 40


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class MoELayer(nn.Module):
    def __init__(self, world, rank):
        super().__init__()
        self.world, self.rank = world, rank
        self.num_experts = EXPERTS_PER_RANK * world
        self.router = nn.Linear(DIM, self.num_experts, bias=False)
        self.experts = nn.ModuleList(Expert() for _ in range(EXPERTS_PER_RANK))

    def forward(self, x):
        tokens = x.reshape(-1, DIM)
        probs = F.softmax(self.router(tokens), dim=-1)
        gate, expert_idx = probs.max(dim=-1)
        capacity = math.ceil(CAPACITY_FACTOR * tokens.shape[0] / self.num_experts)
        onehot = F.one_hot(expert_idx, self.num_experts)
        position = (onehot.cumsum(0) * onehot).sum(-1) - 1
        keep = (position < capacity).nonzero().squeeze(-1)
        order = keep[expert_idx[keep].argsort(stable=True)]

        counts = torch.bincount(expert_idx[order])
        send_counts = counts.view(self.world, EXPERTS_PER_RANK).sum(dim=1)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)
        per_expert = torch.empty_like(counts)
        dist.all_to_all_single(per_expert, counts)

        send_split, recv_split = send_counts.tolist(), recv_counts.tolist()
        recv_tokens = tokens.new_empty(sum(recv_split), DIM)
        recv_tokens = dnnf.all_to_all_single(recv_tokens, tokens[order], recv_split, send_split)

        local = per_expert.view(self.world, EXPERTS_PER_RANK)
        expert_of = torch.cat([
            torch.arange(EXPERTS_PER_RANK).repeat_interleave(local[src]) for src in range(self.world)
        ])
        out = torch.zeros_like(recv_tokens)
        for e, expert in enumerate(self.experts):
            sel = (expert_of == e).nonzero().squeeze(-1)
            out = out.index_add(0, sel, expert(recv_tokens[sel]))

        back = tokens.new_empty(sum(send_split), DIM)
        back = dnnf.all_to_all_single(back, out, send_split, recv_split)
        combined = torch.zeros_like(tokens).index_add(0, order, back * gate[order].unsqueeze(-1))
        dropped = tokens.shape[0] - order.numel()
        return (tokens + combined).view_as(x), dropped


class TinyMoELM(nn.Module):
    def __init__(self, world, rank):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.moe = MoELayer(world, rank)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        h, dropped = self.moe(self.embed(ids))
        return self.head(h), dropped


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = TinyMoELM(world, rank)
    torch.manual_seed(1234 + rank)
    for expert in model.moe.experts:
        for p in expert.parameters():
            nn.init.normal_(p, std=0.02)
    shared = [p for n, p in model.named_parameters() if ".experts." not in n]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    gen = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        ids = torch.randint(0, VOCAB, (2, 9), generator=gen)
        logits, dropped = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        for p in shared:
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        if step % 10 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.3f} dropped {dropped}", flush=True)

    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
