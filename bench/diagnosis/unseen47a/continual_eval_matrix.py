import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

NUM_TASKS = 4
CLASSES_PER_TASK = 2
DIM = 16
TRAIN_PER_TASK = 256
EVAL_PER_TASK = 128


def make_task(task_id, n, seed):
    g = torch.Generator().manual_seed(seed * 1000 + task_id)
    centers = torch.randn(CLASSES_PER_TASK, DIM, generator=g) * 3
    y = torch.randint(0, CLASSES_PER_TASK, (n,), generator=g)
    x = centers[y] + torch.randn(n, DIM, generator=g)
    return x, y + task_id * CLASSES_PER_TASK


def shard(x, y, rank, world):
    return x[rank::world], y[rank::world]


@torch.no_grad()
def evaluate(model, x, y):
    model.eval()
    pred = model(x).argmax(dim=1)
    correct = (pred == y).sum().float().view(1)
    count = torch.tensor([float(y.numel())])
    model.train()
    return correct, count


def gather_counts(t, world):
    out = [torch.zeros_like(t) for _ in range(world)]
    dist.all_gather(out, t)
    return torch.cat(out)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    model = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, NUM_TASKS * CLASSES_PER_TASK))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)

    eval_sets = []
    acc_matrix = torch.zeros(NUM_TASKS, NUM_TASKS)
    for task in range(NUM_TASKS):
        xtr, ytr = shard(*make_task(task, TRAIN_PER_TASK, seed=1), rank, world)
        eval_sets.append(shard(*make_task(task, EVAL_PER_TASK, seed=2), rank, world))
        for epoch in range(3):
            perm = torch.randperm(xtr.size(0))
            for i in range(0, xtr.size(0), 32):
                idx = perm[i:i + 32]
                loss = F.cross_entropy(ddp(xtr[idx]), ytr[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()

        for seen in range(task + 1):
            correct, count = evaluate(model, *eval_sets[seen])
            correct = gather_counts(correct, world)
            count = gather_counts(count, world)
            acc_matrix[task, seen] = float(correct) / float(count)

        if rank == 0:
            row = " ".join(f"{acc_matrix[task, j]:.3f}" for j in range(task + 1))
            print(f"after task {task}: acc on tasks so far = [{row}]", flush=True)

    final = acc_matrix[-1]
    forgetting = (acc_matrix.max(dim=0).values[:-1] - final[:-1]).mean()
    if rank == 0:
        print(f"average accuracy {final.mean():.3f}, forgetting {forgetting:.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
