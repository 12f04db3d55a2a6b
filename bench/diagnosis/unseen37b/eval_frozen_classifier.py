import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Classifier(nn.Module):
    def __init__(self, d_in=32, hidden=64, n_cls=10):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, n_cls)

    def forward(self, x):
        return self.head(self.body(x))


def make_eval_set(n=512, d_in=32, n_cls=10):
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n, d_in, generator=g)
    y = torch.randint(0, n_cls, (n,), generator=g)
    return x, y


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = Classifier()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    if world > 1:
        model = DDP(model)
    x, y = make_eval_set()
    xs, ys = x[rank::world], y[rank::world]
    correct = torch.zeros(1)
    total = torch.zeros(1)
    with torch.no_grad():
        for i in range(0, len(xs), 32):
            logits = model(xs[i:i + 32])
            correct += (logits.argmax(-1) == ys[i:i + 32]).sum()
            total += len(ys[i:i + 32])
    dist.all_reduce(correct)
    dist.all_reduce(total)
    if rank == 0:
        print(f"eval accuracy {correct.item() / total.item():.4f} over {int(total.item())} samples", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
