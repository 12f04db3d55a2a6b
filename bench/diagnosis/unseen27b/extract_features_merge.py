"""Feature extraction job: each rank embeds its slice of the documents with a fixed random
projection of hashed n-gram counts, writes a feature shard, and rank 0 merges the per-rank
entries into one manifest with the global row range of every shard."""
import json
import os
import zlib
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

DIM = 64
BUCKETS = 4096


def documents(rank, world, total=5000):
    rng = np.random.default_rng(42)
    lengths = rng.integers(10, 300, total)
    for i in range(rank, total, world):
        doc_rng = np.random.default_rng(10_000 + i)
        yield i, doc_rng.integers(0, 30000, lengths[i])


def ngram_counts(tokens):
    counts = np.zeros(BUCKETS, dtype=np.float32)
    for a, b in zip(tokens[:-1], tokens[1:]):
        counts[zlib.crc32(f"{a}_{b}".encode()) % BUCKETS] += 1
    return counts / max(1, len(tokens) - 1)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()

    proj = torch.from_numpy(np.random.default_rng(0).standard_normal((BUCKETS, DIM)).astype(np.float32))
    doc_ids, rows = [], []
    for i, toks in documents(rank, world):
        doc_ids.append(i)
        rows.append(ngram_counts(toks))
    feats = torch.from_numpy(np.stack(rows)) @ proj

    os.makedirs("features", exist_ok=True)
    shard = f"features/feat-{rank:05d}.npy"
    np.save(shard, feats.numpy())
    np.save(f"features/ids-{rank:05d}.npy", np.asarray(doc_ids, dtype=np.int64))

    if world > 1:
        counts = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
        dist.all_gather(counts, torch.tensor([len(doc_ids)]))
        sizes = np.array([c.item() for c in counts])
        start = np.concatenate([[0], np.cumsum(sizes)[:-1]])[rank]
        total = sizes.sum()
    else:
        start, total = 0, len(doc_ids)

    entry = {"shard": os.path.basename(shard), "rank": rank, "row_start": start,
             "num_rows": len(doc_ids), "dim": DIM, "mean_norm": float(feats.norm(dim=1).mean())}
    entries = [None] * world
    dist.all_gather_object(entries, entry)

    if rank == 0:
        manifest = {"num_rows": total, "dim": DIM, "shards": entries}
        with open("features/manifest.json", "w") as f:
            json.dump(manifest, f, indent=1)
        print(f"merged manifest: {total} rows in {world} shards", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
