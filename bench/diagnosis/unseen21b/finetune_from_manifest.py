"""Fine-tune a small regressor; rank 0 writes the run manifest that every worker follows."""
import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def parse_args():
    p = argparse.ArgumentParser(description="fine-tune from a run manifest")
    p.add_argument("--rank", default=os.environ.get("RANK", 0))
    p.add_argument("--world-size", type=int, default=os.environ.get("WORLD_SIZE", "1"))
    p.add_argument("--run-name", default=os.environ.get("RUN_NAME", "ft-regressor"))
    p.add_argument("--epochs", type=int, default=int(os.environ.get("EPOCHS", "3")))
    p.add_argument("--lr", type=float, default=os.environ.get("LR", "0.05"))
    p.add_argument("--batch-size", type=int, default=32)
    return p.parse_args()


def build_manifest(args):
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return {
        "run_id": f"{args.run_name}-{stamp}",
        "features": 16,
        "hidden": 64,
        "samples_per_rank": 256,
        "milestones": [max(1, args.epochs // 2)],
        "data_seed": 1234,
    }


def make_data(manifest, rank):
    g = torch.Generator().manual_seed(manifest["data_seed"] + rank)
    n, f = manifest["samples_per_rank"], manifest["features"]
    x = torch.randn(n, f, generator=g)
    w = torch.linspace(-1.0, 1.0, f)
    y = x @ w + 0.1 * torch.randn(n, generator=g)
    return x, y.unsqueeze(1)


def average_gradients(model, world_size):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad.div_(world_size)


def main():
    args = parse_args()
    distributed = args.world_size > 1
    if distributed:
        timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
        dist.init_process_group("gloo", timeout=timeout)
    is_main = args.rank == 0

    holder = [build_manifest(args) if is_main else None]
    if distributed:
        dist.broadcast_object_list(holder, src=0)
    manifest = holder[0]
    if is_main:
        print(f"run {manifest['run_id']}: {args.world_size} worker(s)", flush=True)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(manifest["features"], manifest["hidden"]), nn.Tanh(),
                          nn.Linear(manifest["hidden"], 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=manifest["milestones"], gamma=0.5)
    rank_for_data = dist.get_rank() if distributed else 0
    x, y = make_data(manifest, rank_for_data)

    for epoch in range(args.epochs):
        total = 0.0
        for i in range(0, x.shape[0], args.batch_size):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x[i:i + args.batch_size]), y[i:i + args.batch_size])
            loss.backward()
            if distributed:
                average_gradients(model, args.world_size)
            opt.step()
            total += loss.item()
        sched.step()
        if is_main:
            print(f"epoch {epoch}: loss {total:.4f}", flush=True)

    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
