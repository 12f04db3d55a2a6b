"""Cross-shard merge of exact-duplicate clusters.

Each rank dedups its own shard by content hash, then every rank publishes its surviving
(digest, metadata) pairs. The owner of a digest (digest prefix mod world) sorts what it owns
and keeps the earliest crawl of each digest as the cluster representative.
"""
import datetime
import hashlib
import json
import os

import torch
import torch.distributed as dist

DOCS_PER_RANK = 500


def load_shard(rank, n):
    docs = []
    for i in range(n):
        template = (i * 13 + rank * 5) % 180
        docs.append({"text": f"boilerplate footer {template} all rights reserved",
                     "crawl_ts": 1_700_000_000 + rank * 1000 + i, "shard": rank, "row": i})
    return docs


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    local = {}
    for doc in load_shard(rank, DOCS_PER_RANK):
        d = hashlib.sha256(doc["text"].encode()).hexdigest()
        if d not in local or doc["crawl_ts"] < local[d]["crawl_ts"]:
            local[d] = {"crawl_ts": doc["crawl_ts"], "shard": doc["shard"], "row": doc["row"]}

    gathered = [None] * world
    dist.all_gather_object(gathered, list(local.items()))

    mine = [(d, meta) for part in gathered for d, meta in part if int(d[:8], 16) % world == rank]
    mine = sorted(mine)

    clusters = {}
    for d, meta in mine:
        c = clusters.setdefault(d, {"rep": meta, "size": 0})
        c["size"] += 1
        if meta["crawl_ts"] < c["rep"]["crawl_ts"]:
            c["rep"] = meta

    with open(f"clusters.rank{rank}.json", "w") as f:
        json.dump(clusters, f)
    n = torch.tensor([len(clusters), sum(c["size"] for c in clusters.values())])
    dist.all_reduce(n)
    if rank == 0:
        print(f"clusters: {int(n[0])} covering {int(n[1])} shard-level survivors")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
