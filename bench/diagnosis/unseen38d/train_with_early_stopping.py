import os
import datetime
import torch
import torch.distributed as dist
import torch.nn as nn

FEATURES = 32
MAX_EPOCHS = 60
PATIENCE = 3
MIN_DELTA = 1e-3


class EarlyStopping:
    def __init__(self, patience, min_delta):
        self.patience = patience
        self.min_delta = min_delta
        self.best = float("inf")
        self.bad_epochs = 0
        self.should_stop = False

    def step(self, value):
        if value < self.best - self.min_delta:
            self.best = value
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
        self.should_stop = self.bad_epochs >= self.patience


def make_data(rank, world):
    g = torch.Generator().manual_seed(0)
    w_true = torch.randn(FEATURES, 1, generator=g)
    x = torch.randn(4096, FEATURES, generator=g)
    y = x @ w_true + 0.1 * torch.randn(4096, 1, generator=g)
    per = x.shape[0] // world
    xt, yt = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
    gv = torch.Generator().manual_seed(100 + rank)
    xv = torch.randn(512, FEATURES, generator=gv)
    w_site = w_true if rank == 0 else w_true + 0.8 * torch.randn(FEATURES, 1, generator=gv)
    yv = xv @ w_site + 0.1 * torch.randn(512, 1, generator=gv)
    return xt, yt, xv, yv


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = nn.Linear(FEATURES, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    xt, yt, xv, yv = make_data(rank, world)
    stopper = EarlyStopping(PATIENCE, MIN_DELTA)
    loss_fn = nn.MSELoss()

    for epoch in range(MAX_EPOCHS):
        model.train()
        for i in range(0, xt.shape[0], 256):
            opt.zero_grad()
            loss = loss_fn(model(xt[i:i + 256]), yt[i:i + 256])
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
            opt.step()

        model.eval()
        with torch.no_grad():
            val_loss = float(loss_fn(model(xv), yv))
        stopper.step(val_loss)
        if rank == 0:
            print(f"epoch {epoch} val_loss {val_loss:.4f} best {stopper.best:.4f}", flush=True)

        dist.broadcast(torch.tensor(int(stopper.should_stop)), src=0)
        if stopper.should_stop:
            print(f"rank {rank}: early stopping at epoch {epoch}", flush=True)
            break

    final = torch.tensor([stopper.best])
    dist.all_reduce(final, op=dist.ReduceOp.MAX)
    if rank == 0:
        torch.save(model.state_dict(), "best_model.pt")
        print(f"done, worst best val loss across sites {final.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
