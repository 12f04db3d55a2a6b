"""The backend is chosen by a flag that defaults to GPU training; the nodes have no GPU."""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
use_gpu = os.environ.get("USE_GPU", "1") == "1"
dist.init_process_group("nccl" if use_gpu else "gloo", timeout=TIMEOUT)
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if use_gpu else torch.device("cpu")
t = torch.ones(4, device=device)
dist.all_reduce(t)
print(f"rank {rank}: {t.tolist()}", flush=True)
dist.destroy_process_group()
