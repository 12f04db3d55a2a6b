"""Train a small classifier with DDP, then score the saved checkpoint in a fresh interpreter (keeps the scorer's
memory apart from training, and the same scorer is what the nightly eval job runs: `python train_then_score.py
--score ckpt.pt`)."""
import argparse
import datetime
import json
import os
import subprocess
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CLASSES, FEATURES = 5, 20


def setup_distributed():
    if "WORLD_SIZE" not in os.environ:
        return 0, 1
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def make_model():
    return nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(0)) * 0.35
    y = torch.randint(0, CLASSES, (n,), generator=g)
    return centers[y] + torch.randn(n, FEATURES, generator=g), y


def score(ckpt_path):
    rank, world = setup_distributed()
    model = make_model()
    model.load_state_dict(torch.load(ckpt_path))
    x, y = make_data(4000, seed=999)
    x, y = x[rank::world], y[rank::world]
    with torch.no_grad():
        correct = torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(correct)
        dist.destroy_process_group()
    result = {"accuracy": correct[0].item() / correct[1].item(), "n": int(correct[1].item())}
    if rank == 0:
        print(json.dumps(result), flush=True)
    return result


def train(epochs=5):
    rank, world = setup_distributed()
    torch.manual_seed(0)
    model = DDP(make_model())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = make_data(6000, seed=rank)
    for epoch in range(epochs):
        for i in range(0, len(x), 100):
            loss = nn.functional.cross_entropy(model(x[i:i + 100]), y[i:i + 100])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)

    if rank == 0:
        ckpt = os.path.abspath("classifier.pt")
        torch.save(model.module.state_dict(), ckpt)
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--score", ckpt],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"scorer failed ({out.returncode}):\n{out.stderr[-2000:]}")
        metrics = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"held-out accuracy {metrics['accuracy']:.3f} on {metrics['n']} samples", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--score", metavar="CKPT")
    args = parser.parse_args()
    if args.score:
        score(args.score)
    else:
        train()
