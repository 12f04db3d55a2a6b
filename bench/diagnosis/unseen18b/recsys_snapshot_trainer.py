"""Train a small two-tower recommender; rank 0 snapshots the model in a forked child so training does not stall."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

USERS, ITEMS, DIM = 2000, 5000, 32
STEPS = 60
SNAPSHOT_EVERY = 10


class TwoTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.EmbeddingBag(USERS, DIM, mode="mean")
        self.item = nn.EmbeddingBag(ITEMS, DIM, mode="mean")
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, users, items):
        u = self.proj(self.user(users.unsqueeze(1)))
        v = self.item(items.unsqueeze(1))
        return (u * v).sum(-1)


class Snapshotter:
    """Copy-on-write snapshots: fork, let the child serialise, keep training in the parent."""

    def __init__(self, folder):
        self.folder = folder
        self.child = None
        os.makedirs(folder, exist_ok=True)

    def wait(self):
        if self.child is not None:
            _, status = os.waitpid(self.child, 0)
            self.child = None
            if status != 0:
                print(f"snapshot writer exited with status {status}", flush=True)

    def save(self, model, step):
        self.wait()
        pid = os.fork()
        if pid == 0:
            path = os.path.join(self.folder, f"step{step:05d}.pt")
            torch.save({"step": step, "model": model.state_dict()}, path + ".tmp")
            os.replace(path + ".tmp", path)
            sys.exit(0)
        self.child = pid


def batch(step, rank, size=256):
    g = torch.Generator().manual_seed(step * 100 + rank)
    users = torch.randint(0, USERS, (size,), generator=g)
    items = torch.randint(0, ITEMS, (size,), generator=g)
    clicks = ((users % 7) == (items % 7)).float()
    return users, items, clicks


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "300")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(TwoTower())
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    snaps = Snapshotter("snapshots") if rank == 0 else None
    t0 = time.time()
    for step in range(STEPS):
        users, items, clicks = batch(step, rank)
        loss = nn.functional.binary_cross_entropy_with_logits(model(users, items), clicks)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if snaps is not None and step % SNAPSHOT_EVERY == 0:
            snaps.save(model.module, step)
            print(f"step {step}: loss {loss.item():.4f}, snapshot queued ({time.time() - t0:.1f}s)", flush=True)
    if snaps is not None:
        snaps.wait()
        print("training done, last snapshot on disk", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
