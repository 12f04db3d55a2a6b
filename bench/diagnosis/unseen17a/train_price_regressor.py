import os
import math
import datetime

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

CONFIG = {
    "base_lr": 0.025,
    "reference_batch": 64,
    "batch_per_rank": 64,
    "epochs": 6,
    "patience": 2,
    "momentum": 0.9,
    "train_size": 8192,
    "val_size": 1024,
}


def synthetic_listings(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    x[:, 0] = x[:, 0] * 3 + 6
    w = torch.linspace(-1, 1, 8)
    y = (x * w).sum(1, keepdim=True) + 0.3 * torch.sin(2 * x[:, 1:2]) + 0.1 * torch.randn(n, 1, generator=g)
    return x, y


class WideAndDeep(nn.Module):
    def __init__(self, n_features=8, hidden=64):
        super().__init__()
        self.wide = nn.Linear(n_features, 1)
        self.deep = nn.Sequential(
            nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    def forward(self, x):
        return self.wide(x) + self.deep(x)


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        err = F.mse_loss(model(x), y, reduction="sum")
    stats = torch.stack([err, torch.tensor(float(len(x)))])
    dist.all_reduce(stats)
    model.train()
    return (stats[0] / stats[1]).item()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = CONFIG

    x_train, y_train = synthetic_listings(cfg["train_size"], seed=0)
    x_val, y_val = synthetic_listings(cfg["val_size"], seed=1)
    x_train, y_train = x_train[rank::world], y_train[rank::world]
    x_val, y_val = x_val[rank::world], y_val[rank::world]

    torch.manual_seed(0)
    model = DDP(WideAndDeep())
    global_batch = cfg["batch_per_rank"] * world
    lr = cfg["base_lr"] * global_batch / cfg["reference_batch"]
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=cfg["momentum"])
    steps_per_epoch = len(x_train) // cfg["batch_per_rank"]
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg["epochs"] * steps_per_epoch)
    if rank == 0:
        print(f"world {world}, global batch {global_batch}, lr {lr:.4f}, {steps_per_epoch} steps/epoch", flush=True)

    best, bad_epochs = math.inf, 0
    for epoch in range(cfg["epochs"]):
        perm = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(epoch))
        for step in range(steps_per_epoch):
            idx = perm[step * cfg["batch_per_rank"]:(step + 1) * cfg["batch_per_rank"]]
            loss = F.mse_loss(model(x_train[idx]), y_train[idx])
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss became {loss.item()} at epoch {epoch} step {step}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        val = evaluate(model, x_val, y_val)
        if rank == 0:
            print(f"epoch {epoch}: train loss {loss.item():.4f}  val mse {val:.4f}", flush=True)
        if val < best - 1e-4:
            best, bad_epochs = val, 0
            if rank == 0:
                torch.save(model.module.state_dict(), "price_regressor.pt")
        else:
            bad_epochs += 1
            if bad_epochs >= cfg["patience"]:
                if rank == 0:
                    print(f"early stop at epoch {epoch}", flush=True)
                break

    if rank == 0:
        print(f"best val mse {best:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
