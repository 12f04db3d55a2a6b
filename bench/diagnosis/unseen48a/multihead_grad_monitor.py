import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

TASKS = ["depth", "normals", "segmentation"]
OUT_DIMS = {"depth": 1, "normals": 3, "segmentation": 6}
STEPS = 10


def setup():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


class MultiHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(16, 48), nn.GELU(), nn.Linear(48, 48))
        self.heads = nn.ModuleDict({t: nn.Linear(48, d) for t, d in OUT_DIMS.items()})

    def forward(self, x, tasks):
        h = self.trunk(x)
        return {t: self.heads[t](h) for t in tasks}


class GradNormLog:
    def __init__(self, model, world):
        self.world = world
        self.norms = {}
        for t in TASKS:
            model.heads[t].weight.register_hook(self._make_hook(t))

    def _make_hook(self, task):
        def hook(grad):
            n = grad.norm().detach().reshape(1)
            dist.all_reduce(n)
            self.norms[task] = n.item() / self.world
            return grad
        return hook


def average_gradients(model, world):
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                      for p in model.parameters()])
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n


def main():
    rank, world = setup()
    torch.manual_seed(0)
    model = MultiHead()
    monitor = GradNormLog(model, world)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    my_tasks = TASKS[rank::world]
    g = torch.Generator().manual_seed(rank + 1)

    for step in range(STEPS):
        x = torch.randn(32, 16, generator=g)
        outs = model(x, my_tasks)
        loss = 0.0
        for t, out in outs.items():
            if t == "segmentation":
                y = torch.randint(0, OUT_DIMS[t], (32,), generator=g)
                loss = loss + F.cross_entropy(out, y)
            else:
                y = torch.randn(32, OUT_DIMS[t], generator=g)
                loss = loss + F.mse_loss(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        average_gradients(model, world)
        opt.step()
        if rank == 0 and step % 3 == 0:
            shown = {k: round(v, 4) for k, v in monitor.norms.items()}
            print(f"step {step} loss {loss.item():.4f} head grad norms {shown}", flush=True)

    dist.barrier()
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
