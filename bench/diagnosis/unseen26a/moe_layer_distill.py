import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

HIDDEN = 32
NUM_EXPERTS = 4
TOKENS = 128
STEPS = 40


def exchange(x):
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x.contiguous())
    return out


class EPMoE(nn.Module):
    def __init__(self, ws, rank):
        super().__init__()
        self.ws = ws
        self.n_local = NUM_EXPERTS // ws
        torch.manual_seed(0)
        self.router = nn.Linear(HIDDEN, NUM_EXPERTS, bias=False)
        torch.manual_seed(10 + rank)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(HIDDEN, 2 * HIDDEN), nn.GELU(), nn.Linear(2 * HIDDEN, HIDDEN))
            for _ in range(self.n_local))

    def forward(self, x):
        n = x.shape[0]
        probs = F.softmax(self.router(x), dim=-1)
        gate, eid = probs.max(-1)
        cap = n // NUM_EXPERTS * 2
        onehot = F.one_hot(eid, NUM_EXPERTS)
        pos = (onehot.cumsum(0) - 1)[torch.arange(n), eid]
        keep = pos < cap
        buf = x.new_zeros(NUM_EXPERTS, cap, HIDDEN)
        buf[eid[keep], pos[keep]] = x[keep] * gate[keep].unsqueeze(1)
        if self.ws > 1:
            buf = exchange(buf.view(self.ws, -1, HIDDEN)).view(self.ws, self.n_local, cap, HIDDEN)
        else:
            buf = buf.view(1, self.n_local, cap, HIDDEN)
        out = torch.stack([self.experts[e](buf[:, e]) for e in range(self.n_local)], dim=1)
        if self.ws > 1:
            out = exchange(out.reshape(self.ws, -1, HIDDEN))
        out = out.reshape(NUM_EXPERTS, cap, HIDDEN)
        y = x.new_zeros(n, HIDDEN)
        y[keep] = out[eid[keep], pos[keep]]
        load = onehot.float().mean(0)
        return y, load


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, ws = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42)
    teacher = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(), nn.Linear(4 * HIDDEN, HIDDEN)).eval()
    student = EPMoE(ws, rank)
    opt = torch.optim.Adam(student.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        x = torch.randn(TOKENS, HIDDEN, generator=gen)
        with torch.no_grad():
            target = teacher(x)
        y, load = student(x)
        loss = F.mse_loss(y, target)
        opt.zero_grad()
        loss.backward()
        for p in student.router.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} distill mse {loss.item():.4f} max expert load {load.max().item():.2f}", flush=True)
    if rank == 0:
        torch.save(student.state_dict(), "moe_student.pt")
        print("distillation finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
