"""Each rank reports its run metadata (metrics and the schedule used) to rank 0 for the experiment log."""
import datetime
import os

import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
report = {"rank": rank, "loss": 0.31 + rank / 100}
if rank == 1:  # this rank ran the warm-up schedule and records it too
    report["schedule"] = lambda step: min(1.0, step / 1000)
reports = [None] * world if rank == 0 else None
dist.gather_object(report, reports, dst=0)
if rank == 0:
    print(f"rank 0: {len(reports)} reports", flush=True)
dist.destroy_process_group()
