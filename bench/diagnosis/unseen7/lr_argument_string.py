"""Fine-tuning script for two terminals:
  python lr_argument_string.py --rank R --world-size 2 --lr 3e-4 --epochs 3
(MASTER_ADDR/MASTER_PORT from the environment)."""
import argparse
import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclass
class TrainConfig:
    lr: float = 1e-3
    epochs: int = 2
    weight_decay: float = 0.01
    batch_size: int = 32


def parse_config():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--lr", default=TrainConfig.lr)
    p.add_argument("--epochs", type=int, default=TrainConfig.epochs)
    p.add_argument("--weight-decay", type=float, default=TrainConfig.weight_decay)
    args = p.parse_args()
    return args, TrainConfig(lr=args.lr, epochs=args.epochs, weight_decay=args.weight_decay)


def main():
    args, cfg = parse_config()
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    g = torch.Generator().manual_seed(args.rank)
    for epoch in range(cfg.epochs):
        for _ in range(20):
            x = torch.randn(cfg.batch_size, 16, generator=g)
            loss = nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"rank {args.rank} epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
