import os
import datetime

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

FEATURES = 20
CLASSES = 5
SYNC_EVERY = 8
STEPS = 96
BATCH = 32


def make_shard(rank, world, n=4096):
    g = torch.Generator().manual_seed(7)
    centers = torch.randn(CLASSES, FEATURES, generator=g) * 2
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    x = centers[labels] + torch.randn(n, FEATURES, generator=g)
    return x[rank::world], labels[rank::world]


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, 128), nn.ReLU(), nn.Dropout(0.1),
            nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, CLASSES),
        )

    def forward(self, x):
        return self.net(x)


@torch.no_grad()
def broadcast_parameters(model, src=0):
    for p in model.parameters():
        dist.broadcast(p, src)


def average_parameters(model):
    for p in model.parameters():
        dist.all_reduce(p, op=dist.ReduceOp.AVG)


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        correct = (model(x).argmax(1) == y).sum().float()
    counts = torch.stack([correct, torch.tensor(float(len(y)))])
    dist.all_reduce(counts)
    model.train()
    return (counts[0] / counts[1]).item()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    x, y = make_shard(rank, world)
    split = int(0.9 * len(x))
    x_train, y_train, x_val, y_val = x[:split], y[:split], x[split:], y[split:]

    model = Classifier()
    broadcast_parameters(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1000 + rank)

    for step in range(1, STEPS + 1):
        idx = torch.randint(0, len(x_train), (BATCH,), generator=g)
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if world > 1 and step % SYNC_EVERY == 0:
            average_parameters(model)
        if step % 32 == 0:
            acc = accuracy(model, x_val, y_val)
            if rank == 0:
                print(f"step {step}: local loss {loss.item():.4f}, val acc {acc:.3f}", flush=True)

    if rank == 0:
        torch.save(model.state_dict(), "local_sgd_classifier.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
