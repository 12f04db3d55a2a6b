"""Distributed evaluation: per-class accuracy table summed over all ranks."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

NUM_CLASSES = 10
SAMPLES = 1000


def evaluate(model, rank, world):
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, 16, generator=g)
    y = torch.randint(0, NUM_CLASSES, (SAMPLES,), generator=g)
    mine = torch.arange(rank, SAMPLES, world)
    # columns: correct, seen, loss_sum
    table = torch.zeros(NUM_CLASSES, 3)
    with torch.no_grad():
        logits = model(x[mine])
        losses = torch.nn.functional.cross_entropy(logits, y[mine], reduction="none")
        pred = logits.argmax(1)
        for label, ok, loss in zip(y[mine].tolist(), (pred == y[mine]).tolist(), losses.tolist()):
            table[label, 0] += ok
            table[label, 1] += 1
            table[label, 2] += loss
    for column in range(table.shape[1]):
        dist.all_reduce(table[:, column])
    return table


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, NUM_CLASSES))
    table = evaluate(model, rank, world)
    seen = int(table[:, 1].sum().item())
    acc = (table[:, 0].sum() / table[:, 1].sum()).item()
    print(f"rank {rank}: evaluated {seen} samples, accuracy {acc:.3f}", flush=True)
    for c in range(NUM_CLASSES):
        print(f"rank {rank}: class {c}: correct {table[c, 0]:.0f} seen {table[c, 1]:.0f} loss {table[c, 2]:.2f}")
    if seen != SAMPLES:
        print(f"rank {rank}: evaluation covered {seen} samples, expected {SAMPLES}", file=sys.stderr)
        sys.exit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
