"""Validation pass for a regression-plus-classification model: each rank evaluates its
share of the validation data and the running sums are combined into global metrics."""
import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VAL_ROWS = 1600
BATCH = 64


class TwoHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 48), nn.ReLU())
        self.cls = nn.Linear(48, 4)
        self.reg = nn.Linear(48, 1)

    def forward(self, x):
        h = self.body(x)
        return self.cls(h), self.reg(h).squeeze(-1)


def val_data(seed=7):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(VAL_ROWS, 20, generator=g)
    y_cls = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
    y_reg = x[:, 2] * 0.5 + 0.1 * torch.randn(VAL_ROWS, generator=g)
    return x, y_cls, y_reg


class Meter:
    def __init__(self):
        self.loss_sum = 0.0
        self.sq_err = 0.0
        self.correct = torch.zeros((), dtype=torch.long)
        self.count = torch.zeros((), dtype=torch.long)

    def update(self, logits, pred_reg, y_cls, y_reg):
        loss = F.cross_entropy(logits, y_cls, reduction="sum") + F.mse_loss(pred_reg, y_reg, reduction="sum")
        self.loss_sum += loss.item()
        self.sq_err += float(((pred_reg - y_reg) ** 2).sum())
        self.correct += (logits.argmax(1) == y_cls).sum()
        self.count += y_cls.numel()

    def sync(self):
        if dist.is_initialized() and dist.get_world_size() > 1:
            for value in (self.loss_sum, self.sq_err, self.correct, self.count):
                dist.all_reduce(value, op=dist.ReduceOp.SUM)

    def result(self):
        n = int(self.count)
        return {"loss": self.loss_sum / n, "rmse": (self.sq_err / n) ** 0.5,
                "accuracy": int(self.correct) / n, "rows": n}


@torch.no_grad()
def evaluate(model, x, y_cls, y_reg):
    model.eval()
    meter = Meter()
    for i in range(0, x.shape[0], BATCH):
        logits, pred = model(x[i:i + BATCH])
        meter.update(logits, pred, y_cls[i:i + BATCH], y_reg[i:i + BATCH])
    meter.sync()
    return meter.result()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TwoHead()

    x, y_cls, y_reg = val_data()
    idx = torch.arange(rank, VAL_ROWS, world)
    metrics = evaluate(model, x[idx], y_cls[idx], y_reg[idx])
    if rank == 0:
        print(json.dumps({k: round(v, 4) for k, v in metrics.items()}), flush=True)
        with open("val_metrics.json", "w") as f:
            json.dump(metrics, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
