"""Train a classifier with DDP, checkpoint it with torch.distributed.checkpoint, then score the checkpoint.

The checkpoint holds the model and optimizer (get_state_dict gives plain parameter names) so training can resume;
the evaluation builds a fresh model and loads the saved weights into it, so it scores exactly what was written.
"""
import datetime
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CKPT = Path(__file__).resolve().parent / "checkpoints" / "last"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.encoder(x))


def dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    y = (x[:, :4].argmax(dim=1))
    return TensorDataset(x, y)


def evaluate(model, loader):
    model.eval()
    correct = torch.zeros(2)
    with torch.no_grad():
        for x, y in loader:
            correct[0] += (model(x).argmax(1) == y).sum()
            correct[1] += len(y)
    dist.all_reduce(correct)
    return (correct[0] / correct[1]).item()


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(Net())
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    train, val = dataset(1024, 1), dataset(256, 2)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, seed=0)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    val_loader = DataLoader(val, batch_size=64, sampler=DistributedSampler(val, num_replicas=world, rank=rank,
                                                                              shuffle=False))
    for epoch in range(3):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        model_sd, optim_sd = get_state_dict(model, optimizer)
        dcp.save({"model": model_sd, "optim": optim_sd, "epoch": epoch}, checkpoint_id=str(CKPT))
        if rank == 0:
            print(f"epoch {epoch}: saved {CKPT}", flush=True)

    # score the checkpoint on disk with a fresh model
    fresh = Net()
    weights = fresh.state_dict()
    dcp.load(weights, checkpoint_id=str(CKPT))
    fresh.load_state_dict(weights)
    acc = evaluate(fresh, val_loader)
    if rank == 0:
        print(f"checkpoint val accuracy {acc:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
