"""Near-duplicate pre-filter before pretraining: every rank computes MinHash band keys
for its shard, the band keys of all shards are exchanged, and each rank drops the
documents whose band key was already seen in a lower-numbered shard."""
import hashlib
import os
import pickle
import random
from datetime import timedelta

import torch
import torch.distributed as dist

NUM_PERM = 16
BANDS = 4
WORDS = ["data", "model", "token", "layer", "train", "batch", "loss", "graph", "node",
         "rank", "shard", "index", "merge", "vocab", "split", "query", "table", "score"]


def make_shard(shard_id):
    rng = random.Random(1000 + shard_id)
    n_docs = 900 + 700 * shard_id
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) for _ in range(n_docs)]


def minhash(text):
    grams = {text[i:i + 5] for i in range(max(1, len(text) - 4))}
    sig = []
    for p in range(NUM_PERM):
        salt = p.to_bytes(2, "little")
        sig.append(min(int.from_bytes(hashlib.blake2b(salt + g.encode(), digest_size=4).digest(), "little")
                       for g in grams))
    return sig


def band_keys(sig):
    rows = NUM_PERM // BANDS
    return [int.from_bytes(hashlib.sha1(repr(sig[b * rows:(b + 1) * rows]).encode()).digest()[:4], "little")
            for b in range(BANDS)]


def all_gather_list(data, max_size=16384):
    """Gather arbitrary picklable data from every rank (fixed-size slots, one per rank)."""
    world = dist.get_world_size()
    if world == 1:
        return [data]
    rank = dist.get_rank()
    enc = pickle.dumps(data)
    enc_size = len(enc)
    header = 4
    if enc_size + header > max_size:
        raise ValueError(f"encoded data size ({enc_size}) exceeds max_size ({max_size})")
    buffer = torch.zeros(world * max_size, dtype=torch.uint8)
    start = rank * max_size
    buffer[start:start + header] = torch.tensor(list(enc_size.to_bytes(header, "big")), dtype=torch.uint8)
    buffer[start + header:start + header + enc_size] = torch.tensor(list(enc), dtype=torch.uint8)
    dist.all_reduce(buffer)
    out = []
    for r in range(world):
        slot = buffer[r * max_size:(r + 1) * max_size]
        size = int.from_bytes(bytes(slot[:header].tolist()), "big")
        out.append(pickle.loads(bytes(slot[header:header + size].tolist())))
    return out


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    docs = make_shard(rank)
    keys = set()
    for text in docs:
        keys.update(band_keys(minhash(text)))
    print(f"rank {rank}: {len(docs)} docs, {len(keys)} band keys", flush=True)

    all_keys = all_gather_list(sorted(keys))
    seen_before = set()
    for r in range(rank):
        seen_before.update(all_keys[r])

    kept = [d for d in docs if not seen_before.intersection(band_keys(minhash(d)))]
    total = torch.tensor([len(docs), len(kept)], dtype=torch.int64)
    dist.all_reduce(total)
    if rank == 0:
        print(f"dedup: kept {int(total[1])} of {int(total[0])} documents", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
