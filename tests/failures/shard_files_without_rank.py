"""Each rank scores its share of the evaluation files and the scores are gathered. The share is sized by the world
size but taken from the same place on every rank (the rank is left out of the slice), so both ranks score the same
files and the report, which checks that every file was scored once, finds half of them missing.
"""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
world = dist.get_world_size()
files = [f"shard-{index:04d}.jsonl" for index in range(64)]
per_worker = len(files) // world
mine = files[:per_worker]  # the mistake: no rank offset


def score(name: str) -> float:
    return float(sum(map(ord, name)) % 97) / 97


scores = {name: score(name) for name in mine}
gathered = [None] * world
dist.all_gather_object(gathered, scores)
merged = {name: value for part in gathered for name, value in part.items()}
print(f"rank {dist.get_rank()}: scored {len(mine)} files, {len(merged)} distinct in all", flush=True)
if len(merged) != len(files):
    raise RuntimeError(f"evaluation incomplete: {len(files) - len(merged)} of {len(files)} files have no score")
dist.destroy_process_group()
