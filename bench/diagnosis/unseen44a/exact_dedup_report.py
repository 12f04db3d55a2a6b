"""Exact-duplicate removal step of the data pipeline: each rank hashes the documents of
its contiguous slice of the corpus, drops repeats inside the slice, and the removed
document ids of every rank are collected so rank 0 can write the dedup report."""
import hashlib
import os
import random
from array import array
from datetime import timedelta

import torch
import torch.distributed as dist

NUM_DOCS = 400
BOILERPLATE = ["cookie policy accept all", "subscribe to our newsletter", "page not found 404"]


def build_corpus():
    rng = random.Random(3)
    docs = []
    for i in range(NUM_DOCS):
        if i < 80 and i % 4 == 0:
            docs.append(BOILERPLATE[i % len(BOILERPLATE)])
        else:
            docs.append(" ".join(str(rng.randint(0, 10**6)) for _ in range(12)))
    return docs


def my_slice(n, rank, world):
    per = (n + world - 1) // world
    return range(rank * per, min(n, (rank + 1) * per))


def gather_bytes(payload):
    """Gather one variable-length byte string from every rank."""
    world = dist.get_world_size()
    local = torch.frombuffer(payload, dtype=torch.uint8)
    size = torch.tensor([local.numel()], dtype=torch.int64)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    longest = max(int(s) for s in sizes)
    padded = torch.zeros(longest, dtype=torch.uint8)
    padded[: local.numel()] = local
    out = [torch.zeros(longest, dtype=torch.uint8) for _ in range(world)]
    dist.all_gather(out, padded)
    return [bytes(o[: int(s)].tolist()) for o, s in zip(out, sizes)]


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    corpus = build_corpus()
    seen, kept, removed = set(), [], array("q")
    for doc_id in my_slice(len(corpus), rank, world):
        digest = hashlib.sha256(corpus[doc_id].encode()).digest()
        if digest in seen:
            removed.append(doc_id)
        else:
            seen.add(digest)
            kept.append(doc_id)

    parts = gather_bytes(bytearray(removed.tobytes()))
    counts = torch.tensor([len(kept)], dtype=torch.int64)
    dist.all_reduce(counts)
    if rank == 0:
        all_removed = []
        for part in parts:
            ids = array("q")
            ids.frombytes(part)
            all_removed.extend(ids)
        with open("dedup_report.txt", "w") as f:
            f.write(f"kept {int(counts)} removed {len(all_removed)}\n")
            f.writelines(f"{i}\n" for i in sorted(all_removed))
        print(f"kept {int(counts)} documents, removed {len(all_removed)}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
