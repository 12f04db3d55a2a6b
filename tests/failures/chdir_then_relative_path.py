"""Rank 0 moves into its run folder (as Hydra does with hydra.job.chdir) to write its logs, then loads the validation
set by the relative path every rank uses: from the run folder, data/val.pt is not there.
"""
import datetime
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank = dist.get_rank()
if rank == 0:
    os.makedirs("data", exist_ok=True)
    torch.save(torch.arange(8.0), "data/val.pt")
dist.barrier()
if rank == 0:
    run_dir = os.path.join("outputs", time.strftime("%Y-%m-%d"), "run")
    os.makedirs(run_dir, exist_ok=True)
    os.chdir(run_dir)  # the mistake: relative paths now start here
    open("train.log", "a").write("started\n")
values = torch.load("data/val.pt")
total = values.sum()
dist.all_reduce(total)
print(f"rank {rank}: validation total {total.item()}", flush=True)
dist.destroy_process_group()
