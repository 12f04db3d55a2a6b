import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

WIDTHS = [24, 96, 64, 48, 32, 16, 8]
BATCH = 32
STEPS = int(os.environ.get("TRAIN_STEPS", "6"))


def build_stage(rank, world):
    torch.manual_seed(0)
    layers = [nn.Linear(a, b) for a, b in zip(WIDTHS[:-1], WIDTHS[1:])]
    mine = layers[rank::world]
    blocks = []
    for i, layer in enumerate(mine):
        blocks.append(layer)
        if not (rank == world - 1 and i == len(mine) - 1):
            blocks.append(nn.ReLU())
    return nn.Sequential(*blocks), mine[0].in_features, mine[-1].out_features


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    stage, d_in, d_out = build_stage(rank, world)
    print(f"rank {rank}: stage {stage}", flush=True)
    opt = torch.optim.SGD(stage.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(7)
    for step in range(STEPS):
        x = torch.randn(BATCH, WIDTHS[0], generator=g)
        target = torch.randn(BATCH, WIDTHS[-1], generator=g)
        opt.zero_grad()
        if rank == 0:
            inp = x
        else:
            inp = torch.empty(BATCH, d_in)
            dist.recv(inp, src=rank - 1)
            inp.requires_grad_()
        out = stage(inp)
        if rank < world - 1:
            dist.send(out.detach().contiguous(), dst=rank + 1)
            grad = torch.empty_like(out)
            dist.recv(grad, src=rank + 1)
            out.backward(grad)
        else:
            loss = nn.functional.mse_loss(out, target)
            loss.backward()
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if rank > 0:
            dist.send(inp.grad.contiguous(), dst=rank - 1)
        opt.step()
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
