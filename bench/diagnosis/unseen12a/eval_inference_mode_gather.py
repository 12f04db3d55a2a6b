"""DDP training with a validation pass per epoch. Validation runs under torch.inference_mode() (faster than
no_grad); a small metric object accumulates per-class hits and gathers every rank's counts at the end of the epoch,
so the log shows the job-wide accuracy and each rank's own (to spot a bad shard)."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class PerRankAccuracy:
    """Per-class correct/total counts; its buffers are created on the first update, when the classes are known."""

    def __init__(self):
        self.counts = None  # [2, classes]: correct, total
        self.gathered = None  # [world * 2, classes], reused every epoch

    def update(self, logits, target):
        if self.counts is None:
            classes = logits.shape[1]
            self.counts = torch.zeros(2, classes)
            self.gathered = torch.zeros(dist.get_world_size() * 2, classes)
        hits = (logits.argmax(1) == target).float()
        self.counts[0].index_add_(0, target, hits)
        self.counts[1].index_add_(0, target, torch.ones_like(hits))

    def compute(self):
        dist.all_gather_into_tensor(self.gathered, self.counts)
        by_rank = self.gathered.view(-1, 2, self.counts.shape[1])
        per_rank = by_rank[:, 0].sum(1) / by_rank[:, 1].sum(1)
        total = by_rank.sum(0)
        return (total[0].sum() / total[1].sum()).item(), per_rank.tolist()

    def reset(self):
        self.counts = torch.zeros_like(self.counts)


def batches(rank, n, seed):
    g = torch.Generator().manual_seed(seed + rank)
    for _ in range(n):
        x = torch.randn(64, 20, generator=g)
        yield x, (x[:, :5].sum(1) > 0).long()


@torch.inference_mode()
def validate(model, rank, metric):
    for x, y in batches(rank, 8, 500):
        metric.update(model(x), y)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    metric = PerRankAccuracy()
    for epoch in range(3):
        model.train()
        for x, y in batches(rank, 40, 10 * epoch):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        model.eval()
        validate(model.module, rank, metric)
        accuracy, per_rank = metric.compute()
        metric.reset()
        if rank == 0:
            print(f"epoch {epoch}: val accuracy {accuracy:.3f}, per rank {[round(a, 3) for a in per_rank]}",
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
