"""Each node keeps the label list in its own ~/.cache and writes it only when it is not there yet. node1 still has
the list of an older version of the project (2 labels instead of 5), so its rank builds a smaller output layer and
DDP finds the ranks' models differ.
Run: lab exec --copy tests/failures/label_cache_on_one_node.py -- bash -c '[ "$NODE_RANK" = 1 ] &&
  mkdir -p ~/.cache/intentcls && echo "[\"greet\", \"bye\"]" > ~/.cache/intentcls/labels.json;
  exec python label_cache_on_one_node.py'
"""
import datetime
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

LABELS = ["greet", "bye", "book", "cancel", "refund"]
CACHE = os.path.expanduser("~/.cache/intentcls/labels.json")


def labels() -> list[str]:
    if not os.path.exists(CACHE):  # the mistake: whatever is cached is trusted, whichever version wrote it
        os.makedirs(os.path.dirname(CACHE), exist_ok=True)
        with open(CACHE, "w") as out:
            json.dump(LABELS, out)
    with open(CACHE) as cached:
        return json.load(cached)


rank, world = int(os.environ.get("NODE_RANK", 0)), int(os.environ.get("NNODES", 1))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
model = DistributedDataParallel(torch.nn.Linear(16, len(labels())))
print(f"rank {rank}: classifier over {len(labels())} labels", flush=True)
dist.destroy_process_group()
