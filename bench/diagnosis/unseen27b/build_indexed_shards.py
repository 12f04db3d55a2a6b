"""Convert raw source files into indexed training shards. Each rank converts the source files
assigned to it, numbers its documents with global document ids, writes a shard and then all
ranks exchange their manifest entries and validate the global index before it is published."""
import json
import os
from datetime import timedelta

import numpy as np
import torch.distributed as dist

NUM_SOURCES = 8


def load_source(idx):
    rng = np.random.default_rng(idx)
    n_docs = 250 + 37 * (idx % 5)
    return [rng.integers(0, 50257, rng.integers(16, 256)).astype(np.uint16) for _ in range(n_docs)]


def write_shard(path, docs, first_id):
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    np.savez(path, tokens=np.concatenate(docs), offsets=offsets,
             doc_ids=np.arange(first_id, first_id + len(docs), dtype=np.int64))
    return int(lengths.sum())


def validate(entries, total_docs):
    entries = sorted(entries, key=lambda e: e["first_id"])
    expected = 0
    for e in entries:
        if e["first_id"] != expected:
            raise ValueError(f"global index is not contiguous: shard {e['shard']} starts at doc "
                             f"{e['first_id']}, expected {expected}")
        expected = e["first_id"] + e["num_docs"]
    if expected != total_docs:
        raise ValueError(f"global index covers {expected} docs, sources hold {total_docs}")


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()

    my_sources = list(range(rank, NUM_SOURCES, world))
    docs = [d for s in my_sources for d in load_source(s)]
    first_id = rank * len(docs)

    os.makedirs("shards", exist_ok=True)
    shard = f"shards/train-{rank:05d}.npz"
    n_tokens = write_shard(shard, docs, first_id)
    entry = {"shard": os.path.basename(shard), "rank": rank, "sources": my_sources,
             "first_id": first_id, "num_docs": len(docs), "num_tokens": n_tokens}

    entries = [None] * world
    dist.all_gather_object(entries, entry)
    total_docs = sum(250 + 37 * (i % 5) for i in range(NUM_SOURCES))
    validate(entries, total_docs)

    if rank == 0:
        with open("shards/index.json", "w") as f:
            json.dump({"num_docs": total_docs, "shards": entries}, f, indent=1)
        print(f"published index: {total_docs} docs in {world} shards", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
