"""The output list of all_gather is built as `[torch.empty_like(x)] * world`: one tensor, world times.

Every rank's piece is written into the same tensor in turn, so every slot holds the last rank's piece; the script's
check that the gathered embeddings cover every rank's shard raises.
"""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank, world = dist.get_rank(), dist.get_world_size()
embeddings = torch.full((8, 4), float(rank))
gathered = [torch.empty_like(embeddings)] * world  # the mistake: the same tensor in every slot
dist.all_gather(gathered, embeddings)
owners = sorted({int(part[0, 0].item()) for part in gathered})
if owners != list(range(world)):
    raise RuntimeError(f"gathered embeddings come from ranks {owners}, expected {list(range(world))}")
dist.destroy_process_group()
