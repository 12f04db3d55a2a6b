import argparse
import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn

TASKS = {
    "sentiment": 3,
    "topic": 12,
    "intent": 7,
    "language": 5,
}


def parse_args():
    p = argparse.ArgumentParser(description="multi-task evaluation report")
    p.add_argument("--samples-per-task", type=int, default=512)
    p.add_argument("--report", default="eval_report.json")
    return p.parse_args()


class MultiHead(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(dim, 64), nn.Tanh())
        self.heads = nn.ModuleDict({t: nn.Linear(64, c) for t, c in TASKS.items()})

    def forward(self, x, task):
        return self.heads[task](self.trunk(x))


def task_order(rank):
    names = list(TASKS)
    k = rank % len(names)
    return names[k:] + names[:k]


@torch.no_grad()
def evaluate_task(model, task, n, rank, world):
    n_cls = TASKS[task]
    g = torch.Generator().manual_seed(len(task) * 31 + rank)
    confusion = torch.zeros(n_cls, n_cls, dtype=torch.float64)
    per_rank = n // world
    for start in range(0, per_rank, 64):
        x = torch.randn(min(64, per_rank - start), 48, generator=g)
        y = torch.randint(0, n_cls, (x.shape[0],), generator=g)
        pred = model(x, task).argmax(dim=1)
        confusion.index_put_((y, pred), torch.ones_like(y, dtype=torch.float64), accumulate=True)
    return confusion


def summarize(confusion):
    correct = confusion.diag().sum().item()
    total = confusion.sum().item()
    recall = confusion.diag() / confusion.sum(dim=1).clamp(min=1)
    return {"accuracy": correct / max(total, 1), "macro_recall": recall.mean().item(), "n": int(total)}


def main():
    args = parse_args()
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = MultiHead().eval()
    for p in model.parameters():
        dist.broadcast(p.data, src=0)

    results = {}
    for task in task_order(rank):
        results[task] = evaluate_task(model, task, args.samples_per_task, rank, world)
        print(f"rank {rank} evaluated {task}", flush=True)

    for task, confusion in results.items():
        dist.all_reduce(confusion, op=dist.ReduceOp.SUM)

    if rank == 0:
        report = {task: summarize(c) for task, c in results.items()}
        with open(args.report, "w") as f:
            json.dump(report, f, indent=2)
        for task, r in report.items():
            print(f"{task:10s} acc={r['accuracy']:.3f} recall={r['macro_recall']:.3f} n={r['n']}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
