"""Streaming token loader with resumable per-worker state.

Each rank streams its tokenized shards through a DataLoader; every worker reads
whole shards and reports (worker id, records read) with each batch so the
loader position can be checkpointed and resumed. At checkpoint time the
per-worker positions of all ranks are gathered for the data-state file.
"""
import datetime
import json
import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

N_SHARDS = 6
MAX_WORKERS = 2
SEQ = 32


class TokenShards(IterableDataset):
    def __init__(self, shard_ids, records_per_shard=64):
        self.shard_ids = shard_ids
        self.records_per_shard = records_per_shard

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        read = 0
        for sid in self.shard_ids[wid::nw]:
            g = torch.Generator().manual_seed(sid)
            for _ in range(self.records_per_shard):
                read += 1
                yield torch.randint(0, 32000, (SEQ,), generator=g), wid, read


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    shard_ids = list(range(rank, N_SHARDS, world))
    num_workers = min(MAX_WORKERS, len(shard_ids))
    loader = DataLoader(TokenShards(shard_ids), batch_size=8,
                        num_workers=num_workers)

    position = torch.zeros(num_workers, dtype=torch.long)
    tokens_seen = torch.zeros(1, dtype=torch.long)
    for step, (tokens, wids, reads) in enumerate(loader):
        for w, r in zip(wids.tolist(), reads.tolist()):
            position[w] = max(position[w].item(), r)
        tokens_seen += tokens.numel()
        if step == 9:
            break

    positions = [torch.zeros_like(position) for _ in range(world)]
    dist.all_gather(positions, position)
    dist.all_reduce(tokens_seen)
    if rank == 0:
        state = {"tokens_seen": tokens_seen.item(),
                 "positions": [p.tolist() for p in positions]}
        with open("data_state.json", "w") as f:
            json.dump(state, f)
        print("data state saved:", state, flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
