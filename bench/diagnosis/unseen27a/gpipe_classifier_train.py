"""Sequence classifier trained with a GPipe micro-batch schedule, one pipeline stage per rank."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

IN_DIM, HIDDEN, CLASSES = 48, 96, 10
GLOBAL_BATCH, STEPS = 12, 4


def build_stage(stage_id, n_stages):
    torch.manual_seed(100 + stage_id)
    d_in = IN_DIM if stage_id == 0 else HIDDEN
    mods = [nn.Linear(d_in, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh()]
    if stage_id == n_stages - 1:
        mods.append(nn.Linear(HIDDEN, CLASSES))
    return nn.Sequential(*mods)


def load_batch(step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(GLOBAL_BATCH, IN_DIM, generator=g)
    y = torch.randint(0, CLASSES, (GLOBAL_BATCH,), generator=g)
    return x, y


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    first, last = rank == 0, rank == world - 1
    n_micro = 2 * world
    stage = build_stage(rank, world)
    opt = torch.optim.Adam(stage.parameters(), lr=1e-3)
    print(f"[rank {rank}] stage {rank} of {world}, {n_micro} micro-batches per step", flush=True)

    for step in range(STEPS):
        x, y = load_batch(step)
        x_mbs, y_mbs = x.chunk(n_micro), y.chunk(n_micro)
        fwd = []
        if first:
            for mb in x_mbs:
                out = stage(mb)
                dist.send(torch.tensor([out.size(0)]), dst=rank + 1)
                dist.send(out.detach(), dst=rank + 1)
                fwd.append((None, out))
        else:
            for i in range(n_micro):
                meta = torch.zeros(1, dtype=torch.long)
                dist.recv(meta, src=rank - 1)
                act = torch.zeros(int(meta.item()), HIDDEN)
                dist.recv(act, src=rank - 1)
                act.requires_grad_()
                out = stage(act)
                if last:
                    loss = F.cross_entropy(out, y_mbs[i]) / n_micro
                    fwd.append((act, loss))
                else:
                    dist.send(torch.tensor([out.size(0)]), dst=rank + 1)
                    dist.send(out.detach(), dst=rank + 1)
                    fwd.append((act, out))
        total = 0.0
        for act, out in reversed(fwd):
            if last:
                total += out.item()
                out.backward()
            else:
                grad = torch.zeros_like(out)
                dist.recv(grad, src=rank + 1)
                out.backward(grad)
            if not first:
                dist.send(act.grad, dst=rank - 1)
        opt.step()
        opt.zero_grad()
        if last:
            print(f"[rank {rank}] step {step} loss {total:.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
