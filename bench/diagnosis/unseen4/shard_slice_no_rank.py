"""Hand-made data split: shuffle the sample ids with a fixed seed and give each worker its share."""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank, world = dist.get_rank(), dist.get_world_size()

N = 1000
ids = torch.randperm(N, generator=torch.Generator().manual_seed(42))
per_rank = N // world
my_ids = ids[:per_rank]  # this worker's share
print(f"rank {rank}: {len(my_ids)} samples, first ids {my_ids[:5].tolist()}", flush=True)

# sanity check at the end of the epoch: together the workers must have seen every sample once
seen = torch.zeros(N)
seen[my_ids] = 1
dist.all_reduce(seen)
if not torch.all(seen == 1):
    raise RuntimeError(f"data split is wrong: {(seen == 0).sum().item():.0f} samples never seen, "
                       f"{(seen > 1).sum().item():.0f} seen more than once")
dist.destroy_process_group()
