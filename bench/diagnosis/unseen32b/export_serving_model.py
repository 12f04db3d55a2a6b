import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Scorer(nn.Module):
    def __init__(self, d_in=24, d_hid=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, d_hid), nn.GELU(), nn.Linear(d_hid, d_hid), nn.GELU())
        self.head = nn.Linear(d_hid, 1)

    def forward(self, x):
        return self.head(self.body(x)).squeeze(-1)


def batches(rank, steps, bs=32):
    g = torch.Generator().manual_seed(7 + rank)
    w = torch.linspace(-1, 1, 24)
    for _ in range(steps):
        x = torch.randn(bs, 24, generator=g)
        yield x, x @ w + 0.1 * torch.randn(bs, generator=g)


def export_for_serving(model, example, path):
    model.eval()
    ep = torch.export.export(model, (example,))
    torch.export.save(ep, path)
    return ep


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(Scorer())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step, (x, y) in enumerate(batches(rank, 40)):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0 and rank == 0:
            print(f"step {step} mse {loss.item():.4f}", flush=True)
    dist.barrier()
    example = torch.randn(4, 24)
    if rank == 0:
        ep = export_for_serving(model, example, "scorer.pt2")
        ref = model(example)
        got = ep.module()(example)
        print("export max diff", (ref - got).abs().max().item(), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
