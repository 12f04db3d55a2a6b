"""Pre-train, then fine-tune from the latest checkpoint: two torchrun launches of this script (CPU, gloo).

The team's run script:
    torchrun ... latest_symlink_resume.py --phase pretrain --epochs 2 &&
    torchrun ... latest_symlink_resume.py --phase finetune --resume checkpoints/latest.pt
Rank 0 saves checkpoints/epoch_<n>.pt every epoch and points checkpoints/latest.pt at the newest one.
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def build_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 48), torch.nn.GELU(), torch.nn.Linear(48, 3))


def save_checkpoint(model, opt, epoch, ckpt_dir):
    os.makedirs(ckpt_dir, exist_ok=True)
    path = os.path.join(ckpt_dir, f"epoch_{epoch}.pt")
    torch.save({"model": model.module.state_dict(), "optim": opt.state_dict(), "epoch": epoch}, path)
    latest = os.path.join(ckpt_dir, "latest.pt")
    if os.path.lexists(latest):
        os.remove(latest)
    os.symlink(path, latest)
    print(f"saved {path} (latest -> {os.readlink(latest)})", flush=True)


def train(model, opt, epochs, rank, lr_scale=1.0):
    g = torch.Generator().manual_seed(rank)
    for group in opt.param_groups:
        group["lr"] *= lr_scale
    for epoch in range(1, epochs + 1):
        for _ in range(20):
            x = torch.randn(32, 12, generator=g)
            y = (x[:, :3].argmax(1))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        yield epoch, loss.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", choices=["pretrain", "finetune"], required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--ckpt-dir", default="checkpoints")
    parser.add_argument("--resume", default=None)
    args = parser.parse_args()

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    model = build_model()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    start = 0
    if args.resume:
        state = torch.load(args.resume, map_location="cpu")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        start = state["epoch"]
        print(f"rank {rank}: resumed from {args.resume} (epoch {start})", flush=True)
    ddp = DDP(model)
    lr_scale = 0.1 if args.phase == "finetune" else 1.0
    for epoch, loss in train(ddp, opt, args.epochs, rank, lr_scale):
        if rank == 0:
            print(f"{args.phase} epoch {start + epoch} loss {loss:.4f}", flush=True)
            if args.phase == "pretrain":
                save_checkpoint(ddp, opt, start + epoch, args.ckpt_dir)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
