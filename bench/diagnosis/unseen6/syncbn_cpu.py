"""Small convolutional classifier for 16x16 sensor maps; BatchNorm statistics synchronised across ranks."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))


class SensorNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(conv_block(1, 8), conv_block(8, 16))
        self.head = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def batches(rank, steps, batch=16):
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(batch, 1, 16, 16, generator=g)
        y = (x.mean(dim=(1, 2, 3)) > 0).long() + 2 * (x[:, :, :8].mean(dim=(1, 2, 3)) > 0).long()
        yield x, y


def build_model(small_batches_per_rank=True):
    model = SensorNet()
    if small_batches_per_rank:
        # each rank sees only 16 maps per step: share the BatchNorm statistics across ranks
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    return model


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(build_model())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    for step, (x, y) in enumerate(batches(rank, steps=30)):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
