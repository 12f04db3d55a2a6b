"""Two-stage pipeline: stage 0 embeds, stage 1 runs the head; activations go forward, gradients come back."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
peer = 1 - rank
hidden = torch.zeros(8, 16)
grad = torch.zeros(8, 16)
for step in range(3):
    if rank == 0:
        # wait for the gradient of the previous micro-batch before sending the next activations
        dist.recv(grad, src=peer)
        dist.send(torch.randn(8, 16), dst=peer)
    else:
        dist.recv(hidden, src=peer)
        dist.send(hidden * 0.5, dst=peer)
    print(f"rank {rank}: step {step} done", flush=True)
dist.destroy_process_group()
