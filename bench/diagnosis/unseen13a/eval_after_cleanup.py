"""Train, clean up, then evaluate: train() and evaluate() are separate entry points (each usable on its own, as in
`python -m pkg.train` / `python -m pkg.evaluate`), so each sets up and tears down torch.distributed itself."""
import datetime
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def setup_distributed():
    if not dist.is_initialized():
        timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
        dist.init_process_group("gloo", init_method="env://", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def cleanup_distributed():
    if dist.is_initialized():
        dist.destroy_process_group()


def make_data(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1024, 12, generator=g)
    y = (x[:, :3].sum(1) > 0).long()
    return x, y


def train(path="classifier.pt"):
    rank, world = setup_distributed()
    x, y = make_data(0)
    x, y = x[rank::world], y[rank::world]
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    for epoch in range(5):
        for i in range(0, len(x), 64):
            loss = nn.functional.cross_entropy(model(x[i:i + 64]), y[i:i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
    if rank == 0:
        torch.save(model.module.state_dict(), path)
        print(f"trained, last loss {loss.item():.4f}", flush=True)
    dist.barrier()
    cleanup_distributed()


def evaluate(path="classifier.pt"):
    rank, world = setup_distributed()
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2))
    model.load_state_dict(torch.load(path))
    x, y = make_data(1)
    x, y = x[rank::world], y[rank::world]
    with torch.no_grad():
        correct = (model(x).argmax(1) == y).sum()
    counts = torch.tensor([float(correct), float(len(y))])
    dist.all_reduce(counts)
    if rank == 0:
        print(f"eval accuracy {counts[0] / counts[1]:.3f}", flush=True)
    cleanup_distributed()


if __name__ == "__main__":
    train()
    evaluate()
