import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class AverageMeter:
    def __init__(self, name):
        self.name = name
        self.reset()

    def reset(self):
        self.sum = 0.0
        self.count = 0
        self.avg = 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def all_reduce(self):
        if not (dist.is_initialized() and dist.get_world_size() > 1):
            return
        total = torch.tensor([self.sum], dtype=torch.float64)
        count = torch.tensor([self.count], dtype=torch.float64)
        dist.all_reduce(total)
        dist.all_reduce(count)
        self.sum, self.count = total, count
        self.avg = total / count


def data(rank, n=192):
    g = torch.Generator().manual_seed(7 + rank)
    x = torch.randn(n, 10, generator=g)
    y = x[:, :3].sum(1, keepdim=True) + 0.1 * torch.randn(n, 1, generator=g)
    return x, y


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    os.makedirs("ckpt", exist_ok=True)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = data(rank)
    xv, yv = data(rank + 100, n=64)
    best = float("inf")
    for epoch in range(3):
        model.train()
        train_meter = AverageMeter("train_loss")
        for i in range(0, x.size(0), 32):
            loss = nn.functional.mse_loss(model(x[i:i + 32]), y[i:i + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
            train_meter.update(loss.item(), n=32)
        model.eval()
        val_meter = AverageMeter("val_loss")
        with torch.no_grad():
            for i in range(0, xv.size(0), 16):
                vl = nn.functional.mse_loss(model(xv[i:i + 16]), yv[i:i + 16])
                val_meter.update(vl.item(), n=16)
        train_meter.all_reduce()
        val_meter.all_reduce()
        if rank == 0:
            if val_meter.avg < best:
                best = val_meter.avg
                path = os.path.join("ckpt", f"epoch{epoch:02d}-val{val_meter.avg:.4f}.pt")
                torch.save(model.module.state_dict(), path)
                print(f"saved {path}", flush=True)
            print(f"epoch {epoch} train={float(train_meter.avg):.4f} "
                  f"val={float(val_meter.avg):.4f}", flush=True)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
