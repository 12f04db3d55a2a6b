"""Run-scoped keys: rank 0 publishes the resolved config under the run's prefix; the workers read it."""
import datetime
import json
import os

import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))
base = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1, world, rank == 0,
                     timeout=timeout)
run_store = dist.PrefixStore("run-7f3a", base)
if rank == 0:
    run_store.set("config", json.dumps({"lr": 3e-4, "batch": 64}))
    config = json.loads(run_store.get("config"))
else:
    config = json.loads(base.get("config"))
print(f"rank {rank}: config {config}", flush=True)
