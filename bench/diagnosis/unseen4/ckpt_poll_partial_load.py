"""Rank 0 saves the model after pre-training; the other ranks wait for the file to appear and load it."""
import datetime
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank = dist.get_rank()
path = os.path.join("checkpoints", "pretrained.pt")

if rank == 0:
    os.makedirs("checkpoints", exist_ok=True)
    # a "big" encoder, as after pre-training (80 MB)
    state = {f"encoder.layer{i}.weight": torch.randn(1000, 2000) for i in range(10)}
    torch.save({"model": state, "step": 5000}, path)
    print("rank 0: saved", path, flush=True)
else:
    # wait for rank 0's checkpoint instead of a barrier ("the file is there when it exists")
    while not os.path.exists(path):
        time.sleep(0.001)
    ckpt = torch.load(path, map_location="cpu")
    print(f"rank {rank}: loaded step {ckpt['step']}", flush=True)

dist.barrier()
dist.destroy_process_group()
