import builtins
import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn


# ---- dist_utils -----------------------------------------------------------
def is_dist():
    return dist.is_available() and dist.is_initialized()


def get_rank():
    return dist.get_rank() if is_dist() else 0


def get_world_size():
    return dist.get_world_size() if is_dist() else 1


def setup_for_distributed(is_master):
    if not is_master:
        builtins.print = lambda *args: None


def init_distributed():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    setup_for_distributed(get_rank() == 0)


def reduce_scalar(value, average=True):
    t = torch.tensor([float(value)])
    if get_world_size() > 1:
        dist.all_reduce(t)
        if average:
            t /= get_world_size()
    return t.item()


def log_step(step, **metrics):
    parts = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
    print(f"[{time.strftime('%H:%M:%S')}] step {step:04d} {parts}", flush=True)
# ---------------------------------------------------------------------------


def synthetic_batch(step, rank, bs=32, d=24, classes=5):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(bs, d, generator=g)
    y = (x[:, :classes].argmax(dim=1))
    return x, y


def main():
    init_distributed()
    rank = get_rank()
    print("world size", get_world_size())

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 5))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)

    for step in range(1, 41):
        x, y = synthetic_batch(step, rank)
        logits = ddp(x)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            acc = (logits.argmax(dim=1) == y).float().mean().item()
            log_step(step, loss=reduce_scalar(loss.item()), acc=reduce_scalar(acc))

    dist.barrier()
    print("training finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
