import json
import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB = 1000
DIM = 16
BATCH = 128


class RowShardedEmbedding(nn.Module):
    def __init__(self, vocab, dim, rank, world):
        super().__init__()
        self.rank, self.world = rank, world
        self.rows = math.ceil(vocab / world)
        self.offset = rank * self.rows
        local_rows = max(0, min(self.rows, vocab - self.offset))
        g = torch.Generator().manual_seed(17 + rank)
        self.shard = nn.Embedding(local_rows, dim)
        with torch.no_grad():
            self.shard.weight.copy_(torch.randn(local_rows, dim, generator=g) * 0.05)

    def owner(self, ids):
        return ids % self.world

    @torch.no_grad()
    def forward(self, ids):
        gathered = [torch.empty_like(ids) for _ in range(self.world)]
        dist.all_gather(gathered, ids)
        all_ids = torch.cat(gathered)
        out = torch.zeros(all_ids.shape[0], self.shard.embedding_dim)
        mine = self.owner(all_ids) == self.rank
        out[mine] = self.shard(all_ids[mine] - self.offset)
        dist.all_reduce(out)
        n = ids.shape[0]
        return out[self.rank * n:(self.rank + 1) * n]


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    table = RowShardedEmbedding(VOCAB, DIM, rank, world)
    my_users = torch.arange(rank, VOCAB, world)
    norms = []
    for ids in my_users.split(BATCH):
        if ids.shape[0] < BATCH:
            ids = torch.cat([ids, ids.new_full((BATCH - ids.shape[0],), ids[0].item())])
        emb = table(ids)
        norms.append(emb.norm(dim=1).mean().item())
    summary = torch.tensor([sum(norms), len(norms)], dtype=torch.float64)
    dist.all_reduce(summary)
    if rank == 0:
        print(json.dumps({"exported_rows": VOCAB, "mean_norm": summary[0].item() / summary[1].item()}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
