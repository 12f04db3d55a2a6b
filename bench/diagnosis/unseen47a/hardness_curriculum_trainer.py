import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

N = 2048
DIM = 20
CLASSES = 5
BATCH = 32
EPOCHS = 4
ALPHA = 0.6


def build_dataset():
    g = torch.Generator().manual_seed(7)
    w = torch.randn(DIM, CLASSES, generator=g)
    x = torch.randn(N, DIM, generator=g)
    noise = torch.rand(N, generator=g)
    logits = x @ w + noise.unsqueeze(1) * torch.randn(N, CLASSES, generator=g) * 4
    return x, logits.argmax(dim=1)


class LossTable:
    def __init__(self, n):
        self.losses = torch.full((n,), float("inf"))

    def update(self, idx, loss):
        self.losses[idx] = loss.detach()

    def sync(self):
        dist.all_reduce(self.losses, op=dist.ReduceOp.MAX)

    def sampling_weights(self):
        p = self.losses.pow(ALPHA)
        return p / p.sum()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    x, y = build_dataset()

    model = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    table = LossTable(N)
    steps_per_epoch = N // (BATCH * world)

    gen = torch.Generator().manual_seed(1234)
    for epoch in range(EPOCHS):
        if epoch == 0:
            order = torch.randperm(N, generator=gen)
        else:
            table.sync()
            order = torch.multinomial(table.sampling_weights(), N, replacement=True, generator=gen)
        mine = order[rank::world]
        total = 0.0
        for step in range(steps_per_epoch):
            idx = mine[step * BATCH:(step + 1) * BATCH]
            per_sample = F.cross_entropy(ddp(x[idx]), y[idx], reduction="none")
            table.update(idx, per_sample)
            loss = per_sample.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        stats = torch.tensor([total, float(steps_per_epoch)])
        dist.all_reduce(stats)
        if rank == 0:
            hard = (table.losses > 1.0).float().mean().item()
            print(f"epoch {epoch}: mean loss {stats[0] / stats[1]:.4f}, hard fraction {hard:.2f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
