"""Files are assigned to ranks by hash() of their names: every process salts string hashes its own way.

`hash(name) % world` differs between processes unless PYTHONHASHSEED is set, so some files go to two ranks and some to
none; the script counts the assignment across ranks and raises.
"""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank, world = dist.get_rank(), dist.get_world_size()
files = [f"shard-{index:05d}.parquet" for index in range(32)]
mine = [name for name in files if hash(name) % world == rank]  # the mistake: salted per process
counts = torch.zeros(len(files))
for name in mine:
    counts[files.index(name)] += 1
dist.all_reduce(counts)
if not bool((counts == 1).all()):
    raise RuntimeError(f"shard assignment is broken: {int((counts > 1).sum())} files on several ranks, "
                       f"{int((counts == 0).sum())} on none")
dist.destroy_process_group()
