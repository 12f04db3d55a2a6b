import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

TASKS = {"sentiment": 3, "topic": 5, "rating": 1}
HIDDEN = 32
STEPS = 12


def setup():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN))

    def forward(self, x):
        return self.net(x)


def make_batch(task, n_out, step, rank):
    g = torch.Generator().manual_seed(1000 * step + 17 * rank + len(task))
    x = torch.randn(16, 20, generator=g)
    if n_out == 1:
        y = torch.randn(16, 1, generator=g)
    else:
        y = torch.randint(0, n_out, (16,), generator=g)
    return x, y


def task_loss(out, y, n_out):
    if n_out == 1:
        return F.mse_loss(out, y)
    return F.cross_entropy(out, y)


def main():
    rank, world = setup()
    torch.manual_seed(0)
    encoder = DDP(Encoder())
    heads = {name: nn.Linear(HIDDEN, n) for name, n in TASKS.items()}
    ddp_heads = {}
    params = list(encoder.parameters()) + [p for h in heads.values() for p in h.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    names = list(TASKS)

    for step in range(STEPS):
        task = names[(step + rank) % len(names)]
        if task not in ddp_heads:
            ddp_heads[task] = DDP(heads[task])
        x, y = make_batch(task, TASKS[task], step, rank)
        feats = encoder(x)
        out = ddp_heads[task](feats)
        loss = task_loss(out, y, TASKS[task])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 4 == 0:
            print(f"step {step} task {task} loss {loss.item():.4f}", flush=True)

    if rank == 0:
        torch.save({"encoder": encoder.module.state_dict(),
                    "heads": {k: h.state_dict() for k, h in heads.items()}}, "mtl_final.pt")
        print("saved mtl_final.pt", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
