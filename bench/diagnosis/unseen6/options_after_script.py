"""Image-patch autoencoder trained with DDP; launched with torchrun on each machine.
Options of the script itself: --epochs, --lr, --bottleneck."""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    parser = argparse.ArgumentParser(description="patch autoencoder")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--bottleneck", type=int, default=8)
    return parser.parse_args()


class AutoEncoder(nn.Module):
    def __init__(self, bottleneck):
        super().__init__()
        self.encode = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, bottleneck))
        self.decode = nn.Sequential(nn.Linear(bottleneck, 32), nn.ReLU(), nn.Linear(32, 64))

    def forward(self, x):
        return self.decode(self.encode(x)).view_as(x)


def patches(rank, n=512):
    g = torch.Generator().manual_seed(rank)
    base = torch.linspace(0, 1, 8)
    return (base[None, :, None] * torch.rand(n, 1, 8, generator=g) + 0.05 * torch.randn(n, 8, 8, generator=g))


def main():
    args = parse_args()
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(AutoEncoder(args.bottleneck))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    data = patches(rank)
    for epoch in range(args.epochs):
        for batch in data.split(64):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(batch), batch)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: reconstruction loss {loss.item():.5f} (world {world})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
