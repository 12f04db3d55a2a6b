"""Fit a linear probe with DDP and gradient accumulation (effective batch 4 x 16 per rank), warmup + linear decay.

The schedule is sized in optimizer updates: epochs * batches per epoch / accumulation steps. The job checks at the
end that the probe reached the validation error a converged run gets, and fails otherwise.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ACCUM = 4
EPOCHS = 6
TARGET_VAL_MSE = 0.05


def probe_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(64, 1, generator=torch.Generator().manual_seed(123))
    x = torch.randn(n, 64, generator=g)
    return TensorDataset(x, x @ w + 0.1 * torch.randn(n, 1, generator=g))


def warmup_linear(total, warmup):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / (total - warmup))
    return factor


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    train, val = probe_data(4096, 1), probe_data(512, 2)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, seed=0)
    loader = DataLoader(train, batch_size=16, sampler=sampler, drop_last=True)
    total_updates = EPOCHS * len(loader) // ACCUM
    scheduler = LambdaLR(optimizer, warmup_linear(total_updates, warmup=total_updates // 10))

    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            last_micro = (i + 1) % ACCUM == 0
            if last_micro:
                loss = nn.functional.mse_loss(model(x), y) / ACCUM
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            else:
                with model.no_sync():
                    loss = nn.functional.mse_loss(model(x), y) / ACCUM
                    loss.backward()
            scheduler.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item() * ACCUM:.4f} lr {scheduler.get_last_lr()[0]:.5f}", flush=True)

    model.eval()
    with torch.no_grad():
        xs, ys = val.tensors
        part = slice(rank, None, world)
        err = torch.tensor([nn.functional.mse_loss(model(xs[part]), ys[part], reduction="sum").item(),
                            float(len(ys[part]))])
    dist.all_reduce(err)
    val_mse = (err[0] / err[1]).item()
    if rank == 0:
        print(f"validation mse {val_mse:.4f} (target {TARGET_VAL_MSE})", flush=True)
    dist.destroy_process_group()
    if val_mse > TARGET_VAL_MSE:
        raise SystemExit(f"rank {rank}: probe did not converge: validation mse {val_mse:.4f} > {TARGET_VAL_MSE}")


if __name__ == "__main__":
    main()
