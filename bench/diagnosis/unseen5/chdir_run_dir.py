"""Main process switches into its run folder (as hydra's job.chdir does) so logs land there."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def prepare_data():
    os.makedirs("data", exist_ok=True)
    g = torch.Generator().manual_seed(0)
    torch.save({"x": torch.randn(256, 10, generator=g), "y": torch.randint(0, 3, (256,), generator=g)},
               "data/val.pt")


def enter_run_dir():
    run_dir = os.path.join("outputs", time.strftime("%Y-%m-%d"), "run")
    os.makedirs(run_dir, exist_ok=True)
    os.chdir(run_dir)
    with open("train.log", "a") as log:
        log.write("started\n")


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    if rank == 0:
        prepare_data()
    dist.barrier()
    if rank == 0:
        enter_run_dir()
    val = torch.load("data/val.pt")
    hist = torch.bincount(val["y"], minlength=3).float()
    dist.all_reduce(hist)
    print(f"rank {rank}: label histogram {hist.tolist()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
