"""Fine-tune a small regressor in fp16 with loss scaling, data-parallel over all ranks.

The model is cast to half precision to halve its memory, and a GradScaler keeps small fp16 gradients from
underflowing; gradients are unscaled before clipping, as the AMP recipe says.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_data(n=512, dim=32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(dim, 1, generator=g)
    y = x @ w + 0.05 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 1))
    model = model.half()                     # fp16 weights: half the memory of the fp32 model
    ddp = DDP(model)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-3, eps=1e-4)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)

    data = make_data()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=32, sampler=sampler)

    for epoch in range(3):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad(set_to_none=True)
            pred = ddp(x.half())
            loss = nn.functional.mse_loss(pred.float(), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)       # unscale before clipping
            torch.nn.utils.clip_grad_norm_(ddp.parameters(), max_norm=1.0)
            scaler.step(optimizer)
            scaler.update()
            if rank == 0 and step % 4 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} scale {scaler.get_scale():.0f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
