"""Train a small classifier on a streaming shard dataset (IterableDataset, jsonl shards), then evaluate.

Training samples shards with replacement per rank and per worker (webdataset's resampled=True idea), so no rank ever
runs dry and the loop is bounded by max_steps. The same loader factory builds the validation stream.
"""
import datetime
import json
import os
import random
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

SHARDS = Path("shards")
FEATURES = 16


def write_shards(split: str, n_shards: int, per_shard: int, seed: int) -> list[Path]:
    rng = random.Random(seed)
    paths = []
    for s in range(n_shards):
        path = SHARDS / f"{split}-{s:04d}.jsonl"
        with open(path, "w") as fh:
            for _ in range(per_shard):
                x = [rng.gauss(0, 1) for _ in range(FEATURES)]
                fh.write(json.dumps({"x": x, "y": int(sum(x[:4]) > 0)}) + "\n")
        paths.append(path)
    return paths


class ShardStream(IterableDataset):
    """Streams samples from jsonl shards; with resampled=True it draws shards with replacement forever."""

    def __init__(self, shards: list[Path], resampled: bool = True, seed: int = 0):
        self.shards = [str(p) for p in shards]
        self.resampled = resampled
        self.seed = seed

    def __iter__(self):
        info = get_worker_info()
        worker, n_workers = (info.id, info.num_workers) if info else (0, 1)
        rank, world = dist.get_rank(), dist.get_world_size()
        if self.resampled:
            rng = random.Random(self.seed + 1000 * rank + worker)
            shards = iter(lambda: rng.choice(self.shards), None)
        else:
            shards = iter(self.shards[rank * n_workers + worker::world * n_workers])
        for path in shards:
            with open(path) as fh:
                for line in fh:
                    rec = json.loads(line)
                    yield torch.tensor(rec["x"]), torch.tensor(rec["y"])


def make_loader(shards: list[Path], batch_size: int = 32, resampled: bool = True) -> DataLoader:
    return DataLoader(ShardStream(shards, resampled=resampled), batch_size=batch_size, num_workers=1)


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, rank: int) -> tuple[float, float]:
    model.eval()
    loss_sum = torch.zeros(3)
    for i, (x, y) in enumerate(loader):
        logits = model(x)
        loss_sum[0] += nn.functional.cross_entropy(logits, y, reduction="sum")
        loss_sum[1] += (logits.argmax(1) == y).sum()
        loss_sum[2] += len(y)
        if i and i % 500 == 0:
            print(f"rank {rank}: eval batch {i}, {int(loss_sum[2])} samples so far", flush=True)
    dist.all_reduce(loss_sum)
    model.train()
    return (loss_sum[0] / loss_sum[2]).item(), (loss_sum[1] / loss_sum[2]).item()


def main() -> None:
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    if rank == 0:
        SHARDS.mkdir(exist_ok=True)
        write_shards("train", 8, 256, seed=1)
        write_shards("val", 2, 128, seed=2)
    dist.barrier()
    train_shards = sorted(SHARDS.glob("train-*.jsonl"))
    val_shards = sorted(SHARDS.glob("val-*.jsonl"))
    if rank == 0:
        print(f"train: {len(train_shards)} shards; val: {len(val_shards)} shards x 128 samples", flush=True)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    max_steps = 60
    for step, (x, y) in zip(range(max_steps), make_loader(train_shards)):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    val_loss, val_acc = evaluate(model.module, make_loader(val_shards), rank)
    if rank == 0:
        print(f"val loss {val_loss:.3f} acc {val_acc:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
