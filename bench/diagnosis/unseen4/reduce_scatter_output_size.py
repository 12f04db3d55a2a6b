"""ZeRO-style sharded gradient: reduce-scatter the flat gradient, each rank keeps its shard."""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank, world = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)
params = [torch.nn.Parameter(torch.randn(64, 64)), torch.nn.Parameter(torch.randn(64))]
loss = sum((p ** 2).sum() for p in params) * (rank + 1)
loss.backward()
flat_grad = torch.cat([p.grad.flatten() for p in params])
pad = (-flat_grad.numel()) % world
flat_grad = torch.cat([flat_grad, flat_grad.new_zeros(pad)])

grad_shard = torch.empty_like(flat_grad)  # the shard this rank owns
dist.reduce_scatter_tensor(grad_shard, flat_grad, op=dist.ReduceOp.SUM)
grad_shard /= world
print(f"rank {rank}: shard norm {grad_shard.norm():.3f}", flush=True)
dist.destroy_process_group()
