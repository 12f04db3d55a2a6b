"""A metrics store for the dashboard, started by rank 0 on the job's rendezvous address."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
dashboard = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, rank == 0,
                          timeout=timeout)
dashboard.set(f"rank{rank}/status", "training")
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank}: {t.item()}", flush=True)
dist.destroy_process_group()
