"""A clean-up path calls destroy_process_group when init_process_group was never reached."""
import os

import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
if os.environ.get("SKIP_DISTRIBUTED", "1") == "1":  # the bug: a debug switch left on skips the init ...
    print(f"rank {rank}: training without distributed")
dist.destroy_process_group()  # ... but not the clean-up
