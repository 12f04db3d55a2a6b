"""Fine-tune a pretrained-style MLP block with DDP in bfloat16 to halve its memory; a regression test checks that
the fine-tuning recovers the target mapping.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

DIM = 64


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    teacher = Block()  # the mapping to recover
    model = Block()
    with torch.no_grad():  # start near the teacher: the "pretrained" weights, perturbed
        for p, q in zip(model.parameters(), teacher.parameters()):
            p.copy_(q + 0.05 * torch.randn_like(q))
    model = model.to(torch.bfloat16)  # half the memory of float32 weights
    model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.0)
    g = torch.Generator().manual_seed(rank)
    first = None
    for step in range(300):
        x = torch.randn(64, DIM, generator=g)
        with torch.no_grad():
            target = teacher(x)
        loss = F.mse_loss(model(x.to(torch.bfloat16)).float(), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
        if step % 50 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.5f}", flush=True)
    x = torch.randn(512, DIM, generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        final = torch.tensor([F.mse_loss(model(x.to(torch.bfloat16)).float(), teacher(x)).item()])
    dist.all_reduce(final, op=dist.ReduceOp.AVG)
    print(f"rank {rank} loss first step {first:.5f}, held-out after fine-tuning {final.item():.5f}", flush=True)
    if final.item() > 0.2 * first:
        raise SystemExit(f"rank {rank}: fine-tuning did not converge (held-out loss {final.item():.5f}, "
                         f"first step {first:.5f})")
    dist.barrier()


if __name__ == "__main__":
    try:
        main()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
