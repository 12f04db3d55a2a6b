import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Metric:
    def __init__(self, name, reduce="mean"):
        self.name = name
        self.total, self.count = 0.0, 0
        reducers = {"mean": lambda t, c: t / max(c, 1), "sum": lambda t, c: t}
        self.finalize = reducers[reduce]

    def update(self, value, n=1):
        self.total += float(value) * n
        self.count += n

    def merge(self, other):
        self.total += other.total
        self.count += other.count

    def compute(self):
        return self.finalize(self.total, self.count)


class MetricLogger:
    def __init__(self, names):
        self.metrics = {n: Metric(n, "sum" if n.endswith("_count") else "mean") for n in names}

    def log(self, **values):
        n = values.pop("n", 1)
        for k, v in values.items():
            self.metrics[k].update(v, n)

    def sync(self):
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, self.metrics)
        merged = MetricLogger(self.metrics.keys())
        for part in gathered:
            for k, m in part.items():
                merged.metrics[k].merge(m)
        return {k: m.compute() for k, m in merged.metrics.items()}


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    logger = MetricLogger(["loss", "acc", "sample_count"])
    for step in range(30):
        x = torch.randn(64, 10, generator=g)
        y = torch.randint(0, 3, (64,), generator=g)
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        logger.log(loss=loss.item(), acc=(out.argmax(1) == y).float().mean().item(), n=len(y))
        logger.log(sample_count=1, n=len(y))
        if (step + 1) % 10 == 0:
            summary = logger.sync()
            if rank == 0:
                print(f"step {step + 1}: " + ", ".join(f"{k}={v:.4f}" for k, v in summary.items()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
