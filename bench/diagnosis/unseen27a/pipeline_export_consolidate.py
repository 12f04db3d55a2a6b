"""Fine-tune a pipelined regressor for a few steps, then consolidate the stage weights into one export file."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

D_IN, D_MODEL, N_LAYERS = 24, 64, 6
BATCH, STEPS = 32, 3


class Net(nn.Module):
    def __init__(self, layer_ids=None, with_input=True, with_output=True):
        super().__init__()
        ids = range(N_LAYERS) if layer_ids is None else layer_ids
        self.inp = nn.Linear(D_IN, D_MODEL) if with_input else None
        self.layers = nn.ModuleList(nn.Linear(D_MODEL, D_MODEL) for _ in ids)
        self.out = nn.Linear(D_MODEL, 1) if with_output else None

    def forward(self, x):
        if self.inp is not None:
            x = self.inp(x)
        for layer in self.layers:
            x = x + torch.tanh(layer(x))
        return self.out(x) if self.out is not None else x


def make_stage(rank, world):
    per = N_LAYERS // world
    ids = list(range(rank * per, (rank + 1) * per))
    torch.manual_seed(rank)
    return Net(ids, with_input=rank == 0, with_output=rank == world - 1)


def data(step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(BATCH, D_IN, generator=g)
    return x, x[:, :4].sum(dim=1, keepdim=True)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    stage = make_stage(rank, world)
    opt = torch.optim.SGD(stage.parameters(), lr=0.05)

    for step in range(STEPS):
        x, y = data(step)
        if rank == 0:
            inp = x
        else:
            inp = torch.empty(BATCH, D_MODEL)
            dist.recv(inp, src=rank - 1)
            inp.requires_grad_()
        out = stage(inp)
        if rank == world - 1:
            loss = F.mse_loss(out, y)
            loss.backward()
            print(f"[rank {rank}] step {step} loss {loss.item():.4f}", flush=True)
        else:
            dist.send(out.detach(), dst=rank + 1)
            g = torch.empty_like(out)
            dist.recv(g, src=rank + 1)
            out.backward(g)
        if rank > 0:
            dist.send(inp.grad, dst=rank - 1)
        opt.step()
        opt.zero_grad()

    local = {k: v.detach().clone() for k, v in stage.state_dict().items()}
    parts = [None] * world if rank == 0 else None
    dist.gather_object(local, parts, dst=0)
    if rank == 0:
        merged = {}
        for part in parts:
            merged.update(part)
        full = Net()
        full.load_state_dict(merged)
        torch.save(full.state_dict(), "export_regressor.pt")
        print(f"exported {sum(p.numel() for p in full.parameters())} params", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
