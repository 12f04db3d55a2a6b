import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, HIDDEN = 256, 64, 256


class ColumnParallelLinear(nn.Module):
    def __init__(self, in_f, out_f, rank, world):
        super().__init__()
        full = torch.randn(out_f, in_f) / in_f ** 0.5
        self.weight = nn.Parameter(full.chunk(world, dim=0)[rank].clone())

    def forward(self, x):
        return F.linear(x, self.weight)


class RowParallelLinear(nn.Module):
    def __init__(self, in_f, out_f, rank, world):
        super().__init__()
        full = torch.randn(out_f, in_f) / in_f ** 0.5
        self.weight = nn.Parameter(full.chunk(world, dim=1)[rank].clone())
        self.world = world

    def forward(self, x):
        out = F.linear(x, self.weight)
        if self.world > 1:
            dist.all_reduce(out)
        return out


class TPBlock(nn.Module):
    def __init__(self, rank, world):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = ColumnParallelLinear(DIM, HIDDEN, rank, world)
        self.down = RowParallelLinear(HIDDEN, DIM, rank, world)

    def forward(self, h):
        return h + self.down(F.gelu(self.up(self.norm(h))))


class TinyLM(nn.Module):
    def __init__(self, rank, world, layers=2):
        super().__init__()
        self.world = world
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList(TPBlock(rank, world) for _ in range(layers))
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        h = self.embed(tokens)
        for b in self.blocks:
            h = b(h)
        return self.lm_head(h[:, -1])


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = TinyLM(rank, world).eval()
    temperature = 0.8
    gen = torch.Generator().manual_seed(1234 + rank)

    def decode_step(tokens, uniform):
        logits = model(tokens) / temperature
        probs = F.softmax(logits, dim=-1)
        next_tok = torch.searchsorted(probs.cumsum(-1), uniform).clamp(max=VOCAB - 1)
        if world > 1:
            dist.broadcast(next_tok, src=0)
        return torch.cat([tokens, next_tok], dim=1)

    step = torch.compile(decode_step, fullgraph=True, backend=os.environ.get("COMPILE_BACKEND", "aot_eager"))

    tokens = torch.tensor([[1, 17, 42, 7]])
    with torch.no_grad():
        for _ in range(16):
            uniform = torch.rand(1, 1, generator=gen)
            tokens = step(tokens, uniform)
    if rank == 0:
        print("generated:", tokens[0].tolist(), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
