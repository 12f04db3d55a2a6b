"""A side channel on a TCPStore of the script's own, sized for the GPUs a node would have rather than the processes
that connect: its server waits for 16 clients, 2 come.

Rank 0 builds `TCPStore(..., world_size=GPUS_PER_NODE * NNODES, is_master=True)`, which blocks until that many
clients have connected; the other ranks connect, then wait for the config rank 0 would publish after it, and time
out.
"""
import datetime
import os

import torch.distributed as dist

GPUS_PER_NODE = int(os.environ.get("GPUS_PER_NODE", 8))
timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))
dist.init_process_group("gloo", timeout=timeout)
rank, nnodes = dist.get_rank(), int(os.environ.get("GROUP_WORLD_SIZE", os.environ.get("NNODES", 2)))
side = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 7,
                     world_size=GPUS_PER_NODE * nnodes,  # the mistake: counts GPUs, not the processes that connect
                     is_master=rank == 0, timeout=timeout)
if rank == 0:
    side.set("config", "lr=0.1")
print(f"rank {rank}: {side.get('config').decode()}", flush=True)
dist.destroy_process_group()
