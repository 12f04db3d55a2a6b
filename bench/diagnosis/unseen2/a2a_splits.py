"""MoE token dispatch with all_to_all_single whose split sizes are computed per rank and do not transpose (cf. pytorch/pytorch#117486)."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()

tokens = torch.arange(4, dtype=torch.float32) + 10 * rank
# each rank routes its tokens by its own router; receive sizes are assumed, not exchanged
input_splits = [2, 2] if rank == 0 else [1, 3]
output_splits = [2, 2]
received = torch.zeros(sum(output_splits))
dist.all_to_all_single(received, tokens, output_splits, input_splits)
print(f"rank {rank}: received {received.tolist()}", flush=True)
dist.destroy_process_group()
