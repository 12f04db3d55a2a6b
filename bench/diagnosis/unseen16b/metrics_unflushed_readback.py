"""Train with a DistributedSampler and log metrics per rank to metrics/rank{R}.jsonl; rank 0 then reads every
rank's file back to write the run summary (mean validation loss over ranks, samples seen), as the dashboard wants.
"""
import datetime
import json
import os
import statistics
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

METRICS = Path("metrics")


class JsonlLogger:
    """One append-only JSON-lines file per rank (no locking needed, no interleaving)."""

    def __init__(self, rank: int):
        METRICS.mkdir(exist_ok=True)
        self.fh = open(METRICS / f"rank{rank}.jsonl", "a")

    def log(self, **record) -> None:
        self.fh.write(json.dumps(record) + "\n")


def make_data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    y = (x[:, :5].sum(1) > 0).long()
    return TensorDataset(x, y)


def summarise(world_size: int) -> dict:
    val_losses, samples = [], 0
    for r in range(world_size):
        for line in (METRICS / f"rank{r}.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["split"] == "val":
                val_losses.append(rec["loss"])
            else:
                samples += rec["n"]
    return {"val_loss": statistics.fmean(val_losses), "train_samples": samples}


def main() -> None:
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    logger = JsonlLogger(rank)
    train, val = make_data(2048, 0), make_data(512, 1)
    train_sampler = DistributedSampler(train, shuffle=True, seed=0)
    train_loader = DataLoader(train, batch_size=32, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=64, sampler=DistributedSampler(val, shuffle=False))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        train_sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(train_loader):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 4 == 0:
                logger.log(split="train", epoch=epoch, step=step, loss=round(loss.item(), 4), n=len(y))
        model.eval()
        with torch.no_grad():
            total, count = 0.0, 0
            for x, y in val_loader:
                total += nn.functional.cross_entropy(model(x), y, reduction="sum").item()
                count += len(y)
        model.train()
        logger.log(split="val", epoch=epoch, loss=round(total / count, 4), n=count)
        if rank == 0:
            print(f"epoch {epoch}: rank 0 val loss {total / count:.4f}", flush=True)
    dist.barrier()  # every rank has logged its last epoch
    if rank == 0:
        summary = summarise(world)
        Path("summary.json").write_text(json.dumps(summary))
        print(f"summary: {summary}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
