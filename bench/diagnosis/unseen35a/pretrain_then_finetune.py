import os
import glob
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

SNAP_DIR = "stage1"
PRETRAIN_STEPS = 40
SNAP_EVERY = 10


def snapshot_name(step, rank):
    return os.path.join(SNAP_DIR, f"snap-{step:06d}-{rank}.pt")


def latest_snapshot(rank):
    found = sorted(glob.glob(os.path.join(SNAP_DIR, f"snap-*-{rank}.pt")))
    return found[-1] if found else None


def stage_pretrain(model, rank):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    for step in range(1, PRETRAIN_STEPS + 1):
        x = torch.randn(64, 32, generator=g)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % SNAP_EVERY == 0:
            torch.save({"step": step, "model": model.module.state_dict(),
                        "optim": opt.state_dict(), "rng": torch.get_rng_state()}, snapshot_name(step, rank))
    return loss.item()


def stage_finetune(model, rank, world):
    names = [latest_snapshot(0) if rank == 0 else None]
    dist.broadcast_object_list(names, src=0)
    mine = names[0].replace("-0", f"-{rank}")
    state = torch.load(mine, map_location="cpu")
    model.module.load_state_dict(state["model"])
    torch.set_rng_state(state["rng"])
    head = nn.Linear(32, 3)
    opt = torch.optim.SGD(list(model.parameters()) + list(head.parameters()), lr=0.01)
    g = torch.Generator().manual_seed(50 + rank)
    for step in range(20):
        x = torch.randn(32, 32, generator=g)
        y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
        loss = nn.functional.cross_entropy(head(model(x)), y)
        opt.zero_grad()
        loss.backward()
        for p in head.parameters():
            dist.all_reduce(p.grad)
            p.grad.div_(world)
        opt.step()
    return state["step"], loss.item()


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    os.makedirs(SNAP_DIR, exist_ok=True)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, 32)))
    pre = stage_pretrain(model, rank)
    dist.barrier()
    resumed, fin = stage_finetune(model, rank, world)
    if rank == 0:
        print(f"pretrain loss {pre:.4f}; finetune from step {resumed}: loss {fin:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
