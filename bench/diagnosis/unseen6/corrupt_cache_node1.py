"""Distil a teacher encoder into a smaller student, two machines started by hand:
    python corrupt_cache_node1.py --rank R --world-size N   (MASTER_ADDR/MASTER_PORT set)
The teacher is exported once to the shared folder and cached on each machine's local disk for fast reads."""
import argparse
import datetime
import os
import shutil
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

EXPORT = Path("exports/teacher-v3.pt")
CACHE = Path.home() / ".cache" / "distill" / "teacher-v3.pt"


def teacher_model():
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 16))


def student_model():
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))


def export_teacher():
    torch.manual_seed(42)
    EXPORT.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": teacher_model().state_dict(), "version": 3}, EXPORT)


def cached_teacher_path():
    """Copy the export to local disk once per machine; later runs reuse the cached copy."""
    if not CACHE.exists():
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(EXPORT, CACHE)
    return CACHE


def load_teacher():
    state = torch.load(cached_teacher_path(), map_location="cpu")
    model = teacher_model()
    model.load_state_dict(state["state_dict"])
    return model.eval()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", init_method="env://", rank=args.rank, world_size=args.world_size,
                            timeout=timeout)
    if args.rank == 0:
        export_teacher()
    dist.barrier()
    teacher = load_teacher()
    torch.manual_seed(0)
    student = DDP(student_model())
    opt = torch.optim.Adam(student.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(args.rank)
    for step in range(args.steps):
        x = torch.randn(32, 64, generator=g)
        with torch.no_grad():
            target = teacher(x)
        opt.zero_grad()
        loss = nn.functional.mse_loss(student(x), target)
        loss.backward()
        opt.step()
        if args.rank == 0 and step % 10 == 0:
            print(f"step {step}: distillation loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
