import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

FEATURES, HIDDEN, CLASSES = 32, 64, 5
BATCH, STEPS, SYNC_EVERY, WARMUP_SYNC_STEPS = 16, 24, 4, 2


def make_model():
    return nn.Sequential(
        nn.Linear(FEATURES, HIDDEN), nn.BatchNorm1d(HIDDEN), nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN), nn.BatchNorm1d(HIDDEN), nn.ReLU(),
        nn.Linear(HIDDEN, CLASSES),
    )


def sensor_batch(step, rank):
    g = torch.Generator().manual_seed(7919 * rank + step)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = (x[:, :CLASSES].argmax(dim=1) + rank) % CLASSES
    return x, y


@torch.no_grad()
def broadcast_model(model):
    for tensor in model.state_dict().values():
        dist.broadcast(tensor, src=0)


@torch.no_grad()
def average_model(model):
    world = dist.get_world_size()
    for tensor in model.state_dict().values():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor /= world


@torch.no_grad()
def average_grads(model):
    world = dist.get_world_size()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad /= world


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()

    model = make_model()
    broadcast_model(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    for step in range(STEPS):
        model.train()
        x, y = sensor_batch(step, rank)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if step < WARMUP_SYNC_STEPS:
            average_grads(model)
        opt.step()

        if step >= WARMUP_SYNC_STEPS and (step + 1) % SYNC_EVERY == 0:
            average_model(model)
            if rank == 0:
                print(f"step {step}: averaged replicas, local loss {loss.item():.4f}", flush=True)

    model.eval()
    x, y = sensor_batch(10_000, rank)
    with torch.no_grad():
        correct = (model(x).argmax(dim=1) == y).sum()
    totals = torch.stack([correct.float(), torch.tensor(float(len(y)))])
    dist.all_reduce(totals)
    if rank == 0:
        print(f"final accuracy {totals[0] / totals[1]:.3f}", flush=True)
        torch.save(model.state_dict(), "sensor_model.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
