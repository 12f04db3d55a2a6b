"""A small Trainer with callbacks (Lightning style): validation runs every `val_every` epochs and a checkpoint
callback on the main process keeps the best model by the monitored metric."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CONFIG = {"epochs": 6, "val_every": 2, "monitor": "val_loss", "lr": 0.02}


class Callback:
    def on_epoch_end(self, trainer, metrics):
        pass


class ProgressPrinter(Callback):
    def on_epoch_end(self, trainer, metrics):
        if trainer.is_main:
            print(f"epoch {trainer.epoch}: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()), flush=True)


class BestCheckpoint(Callback):
    def __init__(self, monitor, path="best.pt"):
        self.monitor, self.path, self.best = monitor, path, float("inf")

    def on_epoch_end(self, trainer, metrics):
        if not trainer.is_main:
            return
        current = metrics[self.monitor]
        if current < self.best:
            self.best = current
            torch.save(trainer.model.module.state_dict(), self.path)


class Trainer:
    def __init__(self, model, callbacks):
        self.rank = dist.get_rank()
        self.is_main = self.rank == 0
        self.model = DDP(model)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=CONFIG["lr"])
        self.callbacks = callbacks
        self.gen = torch.Generator().manual_seed(self.rank)
        self.epoch = 0

    def batch(self):
        x = torch.randn(32, 6, generator=self.gen)
        return x, (x[:, 0] * x[:, 1]).unsqueeze(1)

    def train_epoch(self):
        total = torch.zeros(1)
        for _ in range(20):
            x, y = self.batch()
            loss = nn.functional.mse_loss(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            total += loss.detach()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        return {"train_loss": total.item() / 20}

    @torch.no_grad()
    def validate(self):
        x, y = self.batch()
        loss = nn.functional.mse_loss(self.model.module(x), y).reshape(1)
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        return {"val_loss": loss.item()}

    def fit(self):
        for self.epoch in range(CONFIG["epochs"]):
            metrics = self.train_epoch()
            if (self.epoch + 1) % CONFIG["val_every"] == 0:
                metrics.update(self.validate())
            for cb in self.callbacks:
                cb.on_epoch_end(self, metrics)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
    Trainer(model, [ProgressPrinter(), BestCheckpoint(CONFIG["monitor"])]).fit()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
