"""Pre-train a small causal LM with hand-written pipeline parallelism (one stage per rank, GPipe schedule)."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB, HIDDEN, SEQ, N_BLOCKS = 256, 64, 32, 7
BATCH, MICRO, STEPS = 16, 4, 5


class Block(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.ln = nn.LayerNorm(h)
        self.ff = nn.Sequential(nn.Linear(h, 4 * h), nn.GELU(), nn.Linear(4 * h, h))

    def forward(self, x):
        return x + self.ff(self.ln(x))


def build_layers():
    torch.manual_seed(0)
    layers = [nn.Embedding(VOCAB, HIDDEN)]
    layers += [Block(HIDDEN) for _ in range(N_BLOCKS)]
    layers += [nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, VOCAB)]
    return layers


def stage_for(rank, world):
    layers = build_layers()
    per_stage = len(layers) // world
    owned = layers[rank * per_stage:(rank + 1) * per_stage]
    return nn.Sequential(*owned)


def batches(step):
    g = torch.Generator().manual_seed(1000 + step)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    first, last = rank == 0, rank == world - 1
    stage = stage_for(rank, world)
    opt = torch.optim.AdamW(stage.parameters(), lr=3e-4)
    print(f"[rank {rank}] stage {rank}/{world}: {len(stage)} layers, "
          f"{sum(p.numel() for p in stage.parameters())} params", flush=True)
    mb = BATCH // MICRO
    act_shape = (mb, SEQ, HIDDEN)

    for step in range(STEPS):
        t0 = time.time()
        x, y = batches(step)
        xs, ys = x.split(mb), y.split(mb)
        inputs, outputs, losses = [], [], []
        for i in range(MICRO):
            if first:
                inp = xs[i]
            else:
                inp = torch.empty(act_shape)
                dist.recv(inp, src=rank - 1)
                inp.requires_grad_()
            out = stage(inp)
            if last:
                loss = F.cross_entropy(out.reshape(-1, out.size(-1)), ys[i].reshape(-1)) / MICRO
                losses.append(loss)
            else:
                dist.send(out.detach(), dst=rank + 1)
            inputs.append(inp)
            outputs.append(out)
        for i in reversed(range(MICRO)):
            if last:
                losses[i].backward()
            else:
                grad = torch.empty(act_shape)
                dist.recv(grad, src=rank + 1)
                outputs[i].backward(grad)
            if not first:
                dist.send(inputs[i].grad, dst=rank - 1)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if last:
            total = sum(l.item() for l in losses)
            print(f"[rank {rank}] step {step} loss {total:.4f} ({time.time() - t0:.2f}s)", flush=True)

    dist.barrier()
    if rank == 0:
        print("pretraining done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
