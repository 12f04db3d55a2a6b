import os
import random
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

NUM_TASKS = 4
CLASSES_PER_TASK = 2
DIM = 24
PER_TASK = 512
EXEMPLARS_PER_CLASS = 20
BATCH = 32
REPLAY = 16


def make_task(t):
    g = torch.Generator().manual_seed(100 + t)
    centers = torch.randn(CLASSES_PER_TASK, DIM, generator=g) * 2.5
    y = torch.randint(0, CLASSES_PER_TASK, (PER_TASK,), generator=g)
    x = centers[y] + torch.randn(PER_TASK, DIM, generator=g)
    return x, y + t * CLASSES_PER_TASK


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.head = nn.Linear(32, NUM_TASKS * CLASSES_PER_TASK)

    def forward(self, x):
        return self.head(self.features(x))


@torch.no_grad()
def herding(model, x, y, per_class):
    feats = F.normalize(model.features(x), dim=1)
    keep_x, keep_y = [], []
    for c in y.unique().tolist():
        fc, xc = feats[y == c], x[y == c]
        mean = fc.mean(0)
        chosen, running = [], torch.zeros_like(mean)
        for k in range(1, per_class + 1):
            dists = ((mean - (running + fc) / k) ** 2).sum(1)
            if chosen:
                dists[chosen] = float("inf")
            i = int(dists.argmin())
            chosen.append(i)
            running += fc[i]
        keep_x.append(xc[chosen])
        keep_y.append(torch.full((len(chosen),), c))
    return torch.cat(keep_x), torch.cat(keep_y)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    rng = random.Random(42)

    model = Net()
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    memory = {}

    for task in range(NUM_TASKS):
        x, y = make_task(task)
        xs, ys = x[rank::world], y[rank::world]
        for epoch in range(2):
            perm = torch.randperm(xs.size(0))
            for i in range(0, xs.size(0) - BATCH + 1, BATCH):
                bx, by = xs[perm[i:i + BATCH]], ys[perm[i:i + BATCH]]
                if task > 0:
                    old = rng.randrange(task)
                    mx, my = memory[old]
                    pick = torch.randint(0, mx.size(0), (REPLAY,))
                    bx, by = torch.cat([bx, mx[pick]]), torch.cat([by, my[pick]])
                loss = F.cross_entropy(ddp(bx), by)
                opt.zero_grad()
                loss.backward()
                opt.step()

        if task % world == rank:
            memory[task] = herding(model, x, y, EXEMPLARS_PER_CLASS)
        dist.barrier()
        if rank == 0:
            print(f"task {task} done, loss {loss.item():.4f}, memory tasks {sorted(memory)}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
