"""Expert-parallel layer: the ranks that hold an expert average its gradient in the expert group;
a rank whose router sent it no tokens this step has nothing to average."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
expert_group = dist.new_group(ranks=[1, 3], timeout=timeout)
tokens_routed = {0: [5, 3], 1: [4, 2, 6], 2: [1], 3: [7, 0, 2]}
if rank in (1, 3):
    for step, n_tokens in enumerate(tokens_routed[rank]):
        if n_tokens == 0:
            continue
        expert_grad = torch.full((512,), float(n_tokens))
        dist.all_reduce(expert_grad, group=expert_group)
dist.barrier()
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
