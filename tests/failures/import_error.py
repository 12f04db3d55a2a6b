"""The script imports a package the nodes do not have installed."""
import os

import torch.distributed as dist
import wandb  # noqa: F401  the mistake: installed on the laptop, not on the nodes

dist.init_process_group("gloo")
print(f"rank {os.environ.get('RANK')}: started")
