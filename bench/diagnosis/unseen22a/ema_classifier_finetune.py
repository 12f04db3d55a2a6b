"""Fine-tune a classifier head with gradient accumulation, an EMA copy of the weights and early stopping."""
import copy
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

GLOBAL_BATCH = 48
GRAD_ACCUM = 16
EMA_DECAY = 0.995
PATIENCE = 3
MAX_EPOCHS = 20


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 32, generator=g)
    w = torch.randn(32, 5, generator=torch.Generator().manual_seed(0))
    y = (x @ w + 0.5 * torch.randn(n, 5, generator=g)).argmax(dim=1)
    return TensorDataset(x, y)


@torch.no_grad()
def ema_update(ema, model):
    for e, p in zip(ema.parameters(), model.parameters()):
        e.mul_(EMA_DECAY).add_(p.detach(), alpha=1 - EMA_DECAY)


@torch.no_grad()
def evaluate(net, loader):
    stats = torch.zeros(2)
    for x, y in loader:
        stats[0] += nn.functional.cross_entropy(net(x), y, reduction="sum")
        stats[1] += y.numel()
    dist.all_reduce(stats)
    return (stats[0] / stats[1]).item()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    micro_batch = GLOBAL_BATCH // (world * GRAD_ACCUM)
    train, val = make_data(6144, 1), make_data(1024, 2)
    tsampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=0)
    vsampler = DistributedSampler(val, num_replicas=world, rank=rank, shuffle=False)

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 5))
    ema = copy.deepcopy(net).eval()
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    train_loader = DataLoader(train, batch_size=micro_batch, sampler=tsampler, drop_last=True)
    val_loader = DataLoader(val, batch_size=128, sampler=vsampler)
    if rank == 0:
        print(f"world {world}: micro batch {micro_batch} x accum {GRAD_ACCUM}", flush=True)

    best, bad_epochs = float("inf"), 0
    for epoch in range(MAX_EPOCHS):
        tsampler.set_epoch(epoch)
        model.train()
        for i, (x, y) in enumerate(train_loader):
            last = (i + 1) % GRAD_ACCUM == 0
            ctx = model.no_sync() if not last else torch.enable_grad()
            with ctx:
                loss = nn.functional.cross_entropy(model(x), y) / GRAD_ACCUM
                loss.backward()
            if last:
                opt.step()
                opt.zero_grad(set_to_none=True)
                ema_update(ema, net)
        val_loss = evaluate(ema, val_loader)
        if rank == 0:
            print(f"epoch {epoch}: ema val loss {val_loss:.4f}", flush=True)
        if val_loss < best - 1e-4:
            best, bad_epochs = val_loss, 0
        else:
            bad_epochs += 1
            if bad_epochs >= PATIENCE:
                break

    if rank == 0:
        torch.save(ema.state_dict(), "ema_best.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
