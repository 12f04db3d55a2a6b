"""Assign global document ids to every rank's shard and write the id -> shard index."""
import datetime
import json
import os
import zlib

import numpy as np
import torch
import torch.distributed as dist

VOCAB = [f"tok{i}" for i in range(500)]


def make_shard(rank, n_docs):
    rng = np.random.default_rng(1234 + rank)
    docs = []
    for _ in range(n_docs):
        length = int(rng.integers(20, 120))
        words = rng.choice(VOCAB, size=length)
        docs.append(" ".join(words))
    return docs


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    n_local = 800 + 53 * rank
    docs = make_shard(rank, n_local)

    local_count = torch.tensor([len(docs)], dtype=torch.int64)
    counts = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(counts, local_count)
    counts = torch.cat(counts)
    total = int(counts.sum())

    offsets = torch.cumsum(counts, dim=0) - counts[0]
    start = int(offsets[rank])
    doc_ids = torch.arange(start, start + len(docs), dtype=torch.int64)

    owner = torch.full((total,), -1, dtype=torch.int64)
    owner[doc_ids] = rank
    dist.all_reduce(owner, op=dist.ReduceOp.MAX)

    checksums = torch.zeros(total, dtype=torch.int64)
    checksums[doc_ids] = torch.tensor([zlib.crc32(d.encode()) for d in docs], dtype=torch.int64)
    dist.all_reduce(checksums, op=dist.ReduceOp.SUM)

    if (owner < 0).any():
        raise RuntimeError(f"{int((owner < 0).sum())} ids were not assigned to any shard")

    if rank == 0:
        index = {
            "total_docs": total,
            "shard_sizes": counts.tolist(),
            "owner_runs": [[int(r), int((owner == r).sum())] for r in range(world)],
            "checksum_xor": int(np.bitwise_xor.reduce(checksums.numpy())),
        }
        os.makedirs("index", exist_ok=True)
        with open(os.path.join("index", "doc_index.json"), "w") as f:
            json.dump(index, f, indent=2)
        print("wrote index for", total, "documents", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
