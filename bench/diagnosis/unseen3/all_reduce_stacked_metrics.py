"""DDP training with a validation pass whose loss and accuracy are summed over every rank's share of the set."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def validate(model, rank):
    g = torch.Generator().manual_seed(500 + rank)
    loss_sum, correct, count = torch.zeros(()), torch.zeros(()), torch.zeros(())
    with torch.no_grad():
        for _ in range(5):
            x = torch.randn(64, 20, generator=g)
            y = (x[:, :5].sum(1) > 0).long()
            logits = model(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum")
            correct += (logits.argmax(1) == y).sum()
            count += len(y)
    dist.all_reduce(torch.stack([loss_sum, correct, count]))
    return (loss_sum / count).item(), (correct / count).item()


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)
    g = torch.Generator().manual_seed(rank)
    for epoch in range(3):
        for _ in range(10):
            x = torch.randn(32, 20, generator=g)
            y = (x[:, :5].sum(1) > 0).long()
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        val_loss, val_acc = validate(model.module, rank)
        scheduler.step(val_loss)
        # the schedule is driven by the validation loss: it must be the same number on every rank
        seen = [None] * world
        dist.all_gather_object(seen, round(val_loss, 6))
        if len(set(seen)) > 1:
            raise RuntimeError(f"epoch {epoch}: ranks disagree on the validation loss {seen}; "
                               "their learning-rate schedules would drift apart")
        if rank == 0:
            print(f"epoch {epoch}: val loss {val_loss:.4f}, val acc {val_acc:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
