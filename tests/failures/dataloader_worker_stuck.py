"""On one rank a DataLoader worker blocks in the dataset's __getitem__ (a lock taken before fork and never released);
the rank waits for its batch while the other rank waits for it in all_reduce."""
import datetime
import os
import threading
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
cache_lock = threading.Lock()


class ShardDataset(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        with cache_lock:  # the bug: the lock was held by a thread when the worker forked, and never comes free there
            return torch.full((4,), float(index))


def warm_cache():
    with cache_lock:
        time.sleep(3600)


dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
if rank == 1:
    threading.Thread(target=warm_cache, daemon=True).start()
    time.sleep(0.2)
for batch in DataLoader(ShardDataset(), batch_size=8, num_workers=1):
    dist.all_reduce(batch)
print(f"rank {rank}: done")
dist.destroy_process_group()
