"""Join the job with an explicit store (the launcher's env gives rank and world size)."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    timeout = timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    store = dist.HashStore()  # no port to race for (from our single-process test helper)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timeout)
    t = torch.ones(1) * (rank + 1)
    dist.all_reduce(t)
    print(f"rank {rank}: sum {t.item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
