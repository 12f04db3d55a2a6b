import copy
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def data(rank, n, seed):
    g = torch.Generator().manual_seed(seed * 31 + rank)
    return [torch.randn(16, 24, generator=g) for _ in range(n)]


def build(width):
    return nn.Sequential(nn.Linear(24, width), nn.GELU(), nn.Linear(width, 10))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    train_pg = dist.new_group(ranks=list(range(dist.get_world_size())), timeout=timeout)
    torch.manual_seed(0)

    # phase 1: train the teacher
    teacher = DDP(build(128), process_group=train_pg)
    opt = torch.optim.Adam(teacher.parameters(), lr=1e-3)
    for x in data(rank, 10, 1):
        opt.zero_grad()
        target = x[:, :10].sin()
        nn.functional.mse_loss(teacher(x), target).backward()
        opt.step()

    # phase 2: distil into a smaller student; keep a frozen snapshot of the teacher
    frozen = copy.deepcopy(teacher).eval()
    for p in frozen.parameters():
        p.requires_grad_(False)
    student = DDP(build(32), process_group=train_pg)
    opt = torch.optim.Adam(student.parameters(), lr=2e-3)
    for x in data(rank, 10, 2):
        opt.zero_grad()
        with torch.no_grad():
            soft = frozen(x).softmax(-1)
        loss = nn.functional.kl_div(student(x).log_softmax(-1), soft, reduction="batchmean")
        loss.backward()
        opt.step()

    t = torch.tensor([loss.item()])
    dist.all_reduce(t, op=dist.ReduceOp.AVG, group=train_pg)
    if rank == 0:
        print(f"distill loss {t.item():.4f}", flush=True)
        torch.save(student.module.state_dict(), "student.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
