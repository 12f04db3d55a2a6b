import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES, EPOCHS, PATIENCE, BATCH = 20, 30, 2, 32
CKPT = "churn_best.pt"


class ChurnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 16), nn.ReLU())
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(self.body(x)).squeeze(-1)


def shard(rank, world, n=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * torch.randn(n, generator=g) > 0).float()
    return x[rank::world], y[rank::world]


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        logits = model(x)
        stats = torch.tensor([F.binary_cross_entropy_with_logits(logits, y, reduction="sum").item(), float(len(y))])
    model.train()
    dist.all_reduce(stats)
    return (stats[0] / stats[1]).item()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    net = ChurnNet()
    model = DDP(net) if world > 1 else net
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    x_tr, y_tr = shard(rank, world, seed=0)
    x_va, y_va = shard(rank, world, n=256, seed=1)

    best, bad_epochs = float("inf"), 0
    for epoch in range(EPOCHS):
        perm = torch.randperm(len(x_tr), generator=torch.Generator().manual_seed(epoch))
        for i in range(0, len(perm), BATCH):
            idx = perm[i:i + BATCH]
            loss = F.binary_cross_entropy_with_logits(model(x_tr[idx]), y_tr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()

        val = evaluate(model, x_va, y_va)
        if val < best - 1e-3:
            best, bad_epochs = val, 0
            if rank == 0:
                torch.save(model.state_dict(), CKPT)
        else:
            bad_epochs += 1
        if rank == 0:
            print(f"epoch {epoch} val_loss {val:.4f} best {best:.4f} patience {bad_epochs}/{PATIENCE}", flush=True)
        if bad_epochs >= PATIENCE:
            break

    if rank == 0:
        net.load_state_dict(torch.load(CKPT))
        net.eval()
        torch.save({"weights": net.state_dict(), "features": FEATURES, "val_loss": best}, "churn_serving.pt")
        print(f"exported best model (val_loss {best:.4f})", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
