"""Rank 1 tokenises its shard with a helper script run in a subprocess before training."""
import datetime
import os
import subprocess

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
helper = "tokenize_shard.py"
with open(f"{helper}.{rank}", "w") as f:
    f.write("import torch\ntorch.save(torch.arange(100), 'tokens.pt')\nprint('tokenised')\n")
if rank == 1:
    subprocess.run(["/usr/bin/python3", f"{helper}.{rank}"], check=True)
n = torch.tensor([100.0])
dist.all_reduce(n)
print(f"rank {rank}: {n.item()} tokens", flush=True)
dist.destroy_process_group()
