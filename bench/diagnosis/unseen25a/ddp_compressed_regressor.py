"""Demand-forecast regressor trained with DDP; gradients travel as fp16 to halve the all-reduce traffic."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES = 24
LOSS_SCALE = 2.0 ** 12
MAX_SKIPS = 3
STEPS = 40


def fp16_wire_hook(process_group, bucket):
    world = dist.get_world_size(process_group)
    buf = bucket.buffer()
    wire = buf.to(torch.float16)
    fut = dist.all_reduce(wire, group=process_group, async_op=True).get_future()

    def decompress(f):
        reduced = f.value()[0].to(buf.dtype).div_(world)
        buf.copy_(reduced)
        return buf

    return fut.then(decompress)


def make_shard(rank, n=512):
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(n, FEATURES, generator=g)
    w = torch.linspace(-0.5, 0.5, FEATURES)
    y = 3.0 + x @ w + 0.1 * torch.randn(n, generator=g)
    return x, y.unsqueeze(1)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(FEATURES, 64), nn.Tanh(), nn.Linear(64, 1))
    model = DDP(net)
    model.register_comm_hook(dist.group.WORLD, fp16_wire_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    x, y = make_shard(rank)
    skipped = 0
    for step in range(STEPS):
        idx = torch.arange(step * 64, step * 64 + 64) % x.size(0)
        pred = model(x[idx])
        loss = nn.functional.mse_loss(pred, y[idx])
        opt.zero_grad(set_to_none=True)
        (loss * LOSS_SCALE).backward()
        for p in model.parameters():
            p.grad.div_(LOSS_SCALE)
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        if not torch.isfinite(gnorm):
            skipped += 1
            if skipped >= MAX_SKIPS:
                raise RuntimeError(f"{skipped} consecutive steps with non-finite gradients (step {step})")
            continue
        skipped = 0
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} mse {loss.item():.4f} grad_norm {gnorm.item():.3f}", flush=True)

    if rank == 0:
        print("regressor trained", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
