"""Near-duplicate removal across the whole corpus: every rank computes MinHash signatures for its
shard, the signatures of all ranks are gathered, and each rank drops documents that collide
with a document owned by a lower rank (or an earlier document of its own shard)."""
import hashlib
import json
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

NUM_PERM = 64
BANDS = 16
MERSENNE = np.uint64((1 << 61) - 1)


def make_docs(rank, n=600):
    rng = np.random.default_rng(100 + rank)
    base = np.random.default_rng(7)
    templates = [" ".join(f"w{base.integers(0, 5000)}" for _ in range(60)) for _ in range(50)]
    docs = []
    for i in range(n):
        if rng.random() < 0.2:
            docs.append(templates[rng.integers(0, len(templates))])
        else:
            docs.append(" ".join(f"w{rng.integers(0, 5000)}" for _ in range(60)))
    return docs


def shingles(text, k=5):
    words = text.split()
    return {" ".join(words[i:i + k]) for i in range(max(1, len(words) - k + 1))}


def minhash(text, a, b):
    hv = np.array([int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little") >> 3
                   for s in shingles(text)], dtype=np.uint64)
    perm = (hv[:, None] * a[None, :] + b[None, :]) % MERSENNE
    return perm.min(axis=0)


def band_keys(sig):
    rows = NUM_PERM // BANDS
    return [hashlib.sha1(bytes([i]) + sig[i * rows:(i + 1) * rows].tobytes()).hexdigest() for i in range(BANDS)]


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    rng = np.random.default_rng(2024)
    a = rng.integers(1, 1 << 30, NUM_PERM, dtype=np.uint64)
    b = rng.integers(0, 1 << 30, NUM_PERM, dtype=np.uint64)

    docs = make_docs(rank)
    sigs = np.stack([minhash(d, a, b) for d in docs])
    local = torch.from_numpy(sigs)

    if world > 1:
        gathered = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(gathered, local)
    else:
        gathered = [local]

    seen = set()
    for r in range(rank):
        for sig in gathered[r].numpy():
            seen.update(band_keys(sig))
    keep = []
    for i, sig in enumerate(sigs):
        keys = band_keys(sig)
        if not seen.intersection(keys):
            keep.append(i)
        seen.update(keys)

    os.makedirs("dedup", exist_ok=True)
    with open(f"dedup/part-{rank:05d}.jsonl", "w") as f:
        for i in keep:
            f.write(json.dumps({"rank": rank, "idx": i, "text": docs[i]}) + "\n")

    counts = torch.tensor([len(docs), len(keep)])
    dist.all_reduce(counts)
    if rank == 0:
        print(f"kept {counts[1].item()} / {counts[0].item()} documents", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
