"""Distil a frozen MLP teacher into a smaller student with DDP.

Each rank runs the teacher on its own micro-batch; the teacher outputs are shared so
that the confidence weighting of the soft targets is normalised over the whole global
batch rather than per rank.
"""
import os
import datetime

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

NUM_CLASSES = 10
FEATURES = 32
TEMPERATURE = 4.0
ALPHA = 0.7
STEPS = 20
BATCH = 16


def make_teacher():
    torch.manual_seed(1234)
    net = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                        nn.Linear(128, NUM_CLASSES))
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def make_student():
    torch.manual_seed(99)
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, NUM_CLASSES))


def synthetic_batch(step, rank):
    g = torch.Generator().manual_seed(10_000 * step + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = torch.randint(0, NUM_CLASSES, (BATCH,), generator=g)
    return x, y


def global_teacher_targets(teacher, x, world):
    with torch.no_grad():
        t_logits = teacher(x) / TEMPERATURE
    parts = [torch.empty_like(t_logits) for _ in range(world)]
    dist.all_gather(parts, t_logits)
    t_all = torch.cat(parts, dim=0)
    probs = F.softmax(t_all, dim=-1)
    conf = probs.max(dim=-1).values
    weights = conf / conf.mean()
    return probs, weights


def distill_loss(s_logits, t_probs, weights, y):
    log_p = F.log_softmax(s_logits / TEMPERATURE, dim=-1)
    kd = F.kl_div(log_p, t_probs, reduction="none").sum(dim=-1)
    kd = (kd * weights).mean() * TEMPERATURE ** 2
    ce = F.cross_entropy(s_logits, y)
    return ALPHA * kd + (1 - ALPHA) * ce, kd.detach(), ce.detach()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    teacher = make_teacher()
    student = DDP(make_student())
    opt = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)

    for step in range(STEPS):
        x, y = synthetic_batch(step, rank)
        t_probs, weights = global_teacher_targets(teacher, x, world)
        s_logits = student(x)
        loss, kd, ce = distill_loss(s_logits, t_probs, weights, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step:3d} loss {loss.item():.4f} kd {kd.item():.4f} ce {ce.item():.4f}", flush=True)

    stats = torch.tensor([loss.item()])
    dist.all_reduce(stats, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"final mean loss over {world} ranks: {stats.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
