"""Tensor-parallel pretraining of a small MLP-mixer style LM: the feed-forward blocks are split over all ranks."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

VOCAB, DIM, HIDDEN, SEQ = 128, 64, 256, 32
STEPS = 20
MAX_GRAD_NORM = 1.0


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_in = nn.Linear(DIM, HIDDEN)
        self.w_out = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.w_out(F.gelu(self.w_in(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.ffn = FeedForward()

    def forward(self, x):
        return x + self.ffn(self.norm(x))


class MixerLM(nn.Module):
    def __init__(self, n_blocks=3):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.zeros(SEQ, DIM))
        self.blocks = nn.ModuleList(Block() for _ in range(n_blocks))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, x):
        h = self.tok(x) + self.pos[: x.size(1)]
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.norm(h))


def batch(step, bs=8):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randint(0, VOCAB, (bs, SEQ + 1), generator=g)
    return x[:, :-1], x[:, 1:]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    tp_mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))

    torch.manual_seed(1234)
    model = MixerLM()
    for blk in model.blocks:
        parallelize_module(blk.ffn, tp_mesh, {"w_in": ColwiseParallel(), "w_out": RowwiseParallel()})

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    for step in range(STEPS):
        x, y = batch(step)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f} grad_norm {float(gnorm):.3f}", flush=True)

    if rank == 0:
        print("pretraining done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
