"""Each node keeps the preprocessed features in its own ~/.cache and builds them only when the file is not there.
node1's copy was left cut short by an earlier run that was killed while saving it, so its rank fails to load it
while node0 builds and loads its own.
Run: lab exec --copy tests/failures/stale_cache_on_one_node.py -- bash -c '[ "$NODE_RANK" = 1 ] &&
  env -u LAB_FLIGHT_DIR python -c "import os, torch; os.makedirs(os.path.expanduser(\"~/.cache/featcache\"), exist_ok=True);
  torch.save(torch.zeros(200000), os.path.expanduser(\"~/.cache/featcache/features.pt\"))" &&
  truncate -s 30000 ~/.cache/featcache/features.pt; exec python stale_cache_on_one_node.py'
"""
import datetime
import os

import torch
import torch.distributed as dist

CACHE = os.path.expanduser("~/.cache/featcache/features.pt")


def features() -> torch.Tensor:
    if not os.path.exists(CACHE):  # the mistake: any file there is trusted, complete or not
        os.makedirs(os.path.dirname(CACHE), exist_ok=True)
        torch.save(torch.randn(200000), CACHE)
    return torch.load(CACHE)


rank, world = int(os.environ.get("NODE_RANK", 0)), int(os.environ.get("NNODES", 1))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
table = features()
total = torch.tensor([float(table.numel())])
dist.all_reduce(total)
print(f"rank {rank}: {int(total.item())} features in all", flush=True)
dist.destroy_process_group()
