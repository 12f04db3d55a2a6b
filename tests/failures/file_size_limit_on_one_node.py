"""Each rank saves its shard of the optimizer state into the shared checkpoint folder. node1's launch script sets
`ulimit -f 1024` (1 MiB), a limit meant for core files, so its torch.save stops at 1 MiB and fails.
Run: lab exec --copy tests/failures/file_size_limit_on_one_node.py -- bash -c \
  '[ "$NODE_RANK" = 1 ] && ulimit -f 1024; exec python file_size_limit_on_one_node.py'
"""
import datetime
import os

import torch
import torch.distributed as dist

rank, world = int(os.environ.get("NODE_RANK", 0)), int(os.environ.get("NNODES", 1))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
state = {"exp_avg": torch.randn(400_000), "exp_avg_sq": torch.rand(400_000), "step": 100}
os.makedirs("checkpoints/step_100", exist_ok=True)
torch.save(state, f"checkpoints/step_100/optim_shard_{rank}.pt")
dist.barrier()
print(f"rank {rank}: shard saved", flush=True)
dist.destroy_process_group()
