"""Two-stage model-parallel training: the layer stack is split evenly over the ranks, activations go forward
with send/recv and gradients come back the same way."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

WIDTHS = [24, 64, 64, 48, 8, 10]         # 5 linear layers: 24 -> ... -> 10 classes
BATCH = 16


def build_layers():
    torch.manual_seed(0)
    layers = []
    for i, (a, b) in enumerate(zip(WIDTHS[:-1], WIDTHS[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(WIDTHS) - 2:
            layers.append(nn.ReLU())
    return layers


def stage_for(rank, world):
    """This rank's share of the layer stack."""
    layers = build_layers()
    per_stage = len(layers) // world
    return nn.Sequential(*layers[rank * per_stage:(rank + 1) * per_stage])


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    stage = stage_for(rank, world)
    print(f"rank {rank} stage: {stage}", flush=True)
    opt = torch.optim.SGD(stage.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(7)
    for step in range(20):
        x, y = torch.randn(BATCH, WIDTHS[0], generator=g), torch.randint(0, WIDTHS[-1], (BATCH,), generator=g)
        opt.zero_grad()
        if rank == 0:
            act = stage(x)
            dist.send(act.detach(), dst=1)
            grad = torch.empty_like(act)
            dist.recv(grad, src=1)
            act.backward(grad)
        else:
            act = torch.empty(BATCH, stage[0].in_features)
            dist.recv(act, src=0)
            act.requires_grad_(True)
            loss = nn.functional.cross_entropy(stage(act), y)
            loss.backward()
            dist.send(act.grad, dst=0)
            if step % 5 == 0:
                print(f"step {step} loss {loss.item():.3f}", flush=True)
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
