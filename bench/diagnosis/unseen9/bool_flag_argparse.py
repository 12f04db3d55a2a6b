"""Fine-tuning script with command-line options; the launch line passes --freeze-encoder False."""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--freeze-encoder", type=bool, default=False, help="train only the classifier head")
    p.add_argument("--target-accuracy", type=float, default=0.85)
    return p.parse_args()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 6), nn.ReLU())
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.encoder(x))


def dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    score = torch.stack([x[:, 3] - x[:, 7], x[:, 11] + x[:, 2], -x[:, 5] - x[:, 17]], 1)
    return TensorDataset(x, score.argmax(1))


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    if rank == 0:
        print("config:", vars(args), flush=True)
    torch.manual_seed(0)
    model = Classifier()
    if args.freeze_encoder:
        for p in model.encoder.parameters():
            p.requires_grad_(False)
    model = DDP(model)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    train = dataset(4000, 0)
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    val = dataset(1000, 1)
    with torch.no_grad():
        acc = (model.module(val.tensors[0]).argmax(1) == val.tensors[1]).float().mean().item()
    if rank == 0:
        print(f"validation accuracy {acc:.3f}", flush=True)
    if acc < args.target_accuracy:
        raise SystemExit(f"rank {rank}: validation accuracy {acc:.3f} is below the target {args.target_accuracy}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
