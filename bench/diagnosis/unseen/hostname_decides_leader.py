"""The pod whose name ends in -0 downloads the tokenizer and tells the others where it is."""
import datetime
import os
import socket

import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
store = dist.distributed_c10d._get_default_store()
is_leader = socket.gethostname().endswith("-0")
if is_leader:
    store.set("tokenizer_path", "/lab/shared/tokenizer.json")
store.wait(["tokenizer_path"])
print(f"rank {rank}: tokenizer at {store.get('tokenizer_path').decode()}", flush=True)
dist.destroy_process_group()
