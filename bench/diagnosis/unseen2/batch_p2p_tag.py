"""Halo exchange with batch_isend_irecv; rank 1 tags its send with the step, rank 0 expects tag 0 (cf. pytorch/PiPPy#969)."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()

halo = torch.full((4,), float(rank))
inbox = torch.zeros(4)
peer = 1 - rank
for step in range(3):
    send_tag = step if rank == 1 else 0  # rank 1 numbers its messages by step; rank 0 always uses tag 0
    ops = [dist.P2POp(dist.isend, halo, peer, tag=send_tag), dist.P2POp(dist.irecv, inbox, peer, tag=0)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    print(f"rank {rank}: step {step} got halo {inbox[0].item()}", flush=True)
dist.destroy_process_group()
