"""A barrier made by hand on the c10d store, whose counter key is the same every epoch.

Each rank does `store.add("predictions_written", 1)` and waits until the count reaches the world size. In the
second epoch the key still holds the first epoch's count, so the count runs past the world size and never equals
it: every rank waits until its own deadline and raises.
"""
import datetime
import os
import time

import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank, world = dist.get_rank(), dist.get_world_size()
store = dist.distributed_c10d._get_default_store()


def wait_for_everyone(name: str, seconds: float = 6.0) -> None:
    store.add(name, 1)  # the mistake: the same key every epoch, never reset
    deadline = time.time() + seconds
    while int(store.add(name, 0)) != world:
        if time.time() > deadline:
            raise TimeoutError(f"waited {seconds:.0f} s at {name!r} for {world} workers; the counter reads "
                               f"{int(store.add(name, 0))}")
        time.sleep(0.1)


for epoch in range(2):
    time.sleep(0.2 * rank)  # the ranks write their predictions
    wait_for_everyone("predictions_written")
    print(f"rank {rank}: epoch {epoch} predictions written by everyone", flush=True)
dist.destroy_process_group()
