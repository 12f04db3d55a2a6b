"""Image-classifier style training entry point (after the classic ImageNet example): --dist-url / --world-size /
--rank flags, with defaults taken from the environment so the same file runs by hand or under torchrun."""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args():
    parser = argparse.ArgumentParser(description="tiny classifier, data parallel")
    parser.add_argument("--dist-url", default=f"tcp://{os.environ.get('MASTER_ADDR', '127.0.0.1')}:23456",
                        help="url used to set up distributed training")
    parser.add_argument("--dist-backend", default="gloo")
    parser.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", "1")))
    parser.add_argument("--rank", type=int, default=int(os.environ.get("RANK", "0")))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    return parser.parse_args()


def main():
    args = parse_args()
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    print(f"rank {args.rank}/{args.world_size}: init via {args.dist_url}", flush=True)
    dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url,
                            world_size=args.world_size, rank=args.rank, timeout=timeout)

    torch.manual_seed(0)
    x = torch.randn(2048, 20)
    y = (x[:, 0] + x[:, 1] > 0).long()
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if args.rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
