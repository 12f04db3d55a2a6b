"""Training where rank 0 copies each epoch's checkpoint to a team folder that is not mounted on the node, retrying
with back-off for 1.5 x PG_TIMEOUT before it gives up and goes on: rank 1 meanwhile waits in the next epoch's first
all_reduce and gives up at the timeout; rank 0 arrives afterwards and finds its peer gone."""
import datetime
import os
import shutil
import time

import torch
import torch.distributed as dist

TIMEOUT = int(os.environ.get("PG_TIMEOUT", 10))


def copy_to_team_folder(path: str) -> None:
    delay = TIMEOUT / 10
    for attempt in range(4):  # the mistake: 1.5 x the group's timeout of retries, while the other ranks wait
        try:
            shutil.copy(path, "/mnt/team/checkpoints/")
            return
        except OSError as error:
            print(f"copy attempt {attempt + 1} failed: {error}", flush=True)
            time.sleep(delay)
            delay *= 2
    print("giving up on the team copy", flush=True)


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=TIMEOUT))
weights = torch.zeros(16)
for epoch in range(3):
    for step in range(4):
        grad = torch.ones(16)
        dist.all_reduce(grad)
        weights -= 0.1 * grad / world_size
    if rank == 0:
        torch.save(weights, f"/tmp/epoch{epoch}.pt")
        copy_to_team_folder(f"/tmp/epoch{epoch}.pt")
    print(f"rank {rank}: epoch {epoch} done", flush=True)
dist.destroy_process_group()
