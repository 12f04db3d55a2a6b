import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

IN_FEATURES, HIDDEN, OUT = 64, 256, 4


def tp_world():
    return dist.get_world_size() if dist.is_initialized() else 1


def tp_rank():
    return dist.get_rank() if dist.is_initialized() else 0


class _AllReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        if tp_world() > 1:
            dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class RowParallelLinear(nn.Module):
    """Weight split along the input dim; the full input is split across ranks in forward."""

    def __init__(self, in_f, out_f):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_f, in_f // tp_world()))
        self.bias = nn.Parameter(torch.zeros(out_f))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)

    def forward(self, x):
        x_local = x.chunk(tp_world(), dim=-1)[tp_rank()]
        return _AllReduce.apply(F.linear(x_local, self.weight)) + self.bias


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = RowParallelLinear(IN_FEATURES, HIDDEN)
        self.body = nn.Sequential(nn.GELU(), nn.Linear(HIDDEN, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, OUT))

    def forward(self, x):
        return self.body(self.proj(x))


class Trainer:
    def __init__(self, steps=30, lr=1e-3):
        torch.manual_seed(0)
        self.model = Regressor()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.steps = steps
        n = sum(p.numel() for p in self.model.parameters())
        print(f"built regressor with {n} parameters", flush=True)

    def _setup_dist(self):
        if "RANK" in os.environ and not dist.is_initialized():
            timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
            dist.init_process_group("gloo", timeout=timeout)

    def fit(self):
        self._setup_dist()
        g = torch.Generator().manual_seed(42)
        w_true = torch.randn(IN_FEATURES, OUT, generator=g)
        for step in range(self.steps):
            x = torch.randn(32, IN_FEATURES, generator=g)
            y = x @ w_true + 0.1 * torch.randn(32, OUT, generator=g)
            loss = F.mse_loss(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if tp_rank() == 0 and step % 10 == 0:
                print(f"step {step} mse {loss.item():.4f}", flush=True)
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


if __name__ == "__main__":
    Trainer().fit()
