"""Cross-shard near-exact duplicate statistics with a shared Bloom filter: every rank inserts
its paragraphs, the filters are merged, and each rank then counts paragraphs seen elsewhere."""
import datetime
import hashlib
import json
import os

import numpy as np
import torch
import torch.distributed as dist

M_BITS = 1 << 16
K = 4


def positions(text):
    h = hashlib.sha256(text.encode("utf-8")).digest()
    return [int.from_bytes(h[4 * i:4 * i + 4], "little") % M_BITS for i in range(K)]


def synth_paragraphs(rank, n):
    rng = np.random.default_rng(900 + rank)
    words = [f"w{i}" for i in range(3000)]
    return [" ".join(rng.choice(words, size=12)) for _ in range(n)]


def build_filter(paragraphs):
    bits = np.zeros(M_BITS, dtype=np.uint8)
    for p in paragraphs:
        bits[positions(p)] = 1
    return np.packbits(bits)


def contains(packed, text):
    bits = np.unpackbits(packed)
    return all(bits[i] for i in positions(text))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    paras = synth_paragraphs(rank, 3000)
    local = build_filter(paras)
    merged = torch.from_numpy(local.copy())
    dist.all_reduce(merged, op=dist.ReduceOp.SUM)
    merged_np = merged.numpy()

    bits = np.unpackbits(merged_np)
    misses = sum(1 for p in paras if not all(bits[i] for i in positions(p)))
    if misses:
        raise RuntimeError(f"rank {rank}: merged filter is missing {misses} of this shard's paragraphs")

    own_bits = np.unpackbits(local)
    seen_elsewhere = 0
    for p in paras:
        pos = positions(p)
        if all(bits[i] for i in pos) and not all(own_bits[i] for i in pos):
            seen_elsewhere += 1
    fill = float(bits.mean())
    stats = torch.tensor([len(paras), seen_elsewhere], dtype=torch.int64)
    dist.all_reduce(stats)
    if rank == 0:
        os.makedirs("stats", exist_ok=True)
        with open(os.path.join("stats", "bloom.json"), "w") as f:
            json.dump({"paragraphs": int(stats[0]), "cross_shard": int(stats[1]), "fill": fill}, f)
        print("bloom stats written, fill", round(fill, 3), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
