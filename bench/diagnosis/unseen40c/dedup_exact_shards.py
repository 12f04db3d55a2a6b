"""Exact deduplication of a sharded text corpus: every rank dedups its shard, then drops
documents that also occur on other shards, and the job checks the result before writing."""
import datetime
import hashlib
import json
import os

import numpy as np
import torch.distributed as dist

TEMPLATES = [
    "the {a} of {b} is {c}",
    "how to {a} a {b} with {c}",
    "{a} {b} {c} review",
    "best {a} for {b} in {c}",
]
WORDS = ["river", "model", "garden", "engine", "market", "coffee", "station", "paper", "window", "signal"]


def synth_shard(rank, n):
    rng = np.random.default_rng(77 + rank)
    docs = []
    for _ in range(n):
        t = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
        a, b, c = (WORDS[int(i)] for i in rng.integers(len(WORDS), size=3))
        docs.append(t.format(a=a, b=b, c=c))
    return docs


def digest(text):
    norm = " ".join(text.lower().split())
    return hashlib.sha1(norm.encode("utf-8")).hexdigest()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    docs = synth_shard(rank, 1500)
    local = {}
    for d in docs:
        local.setdefault(digest(d), d)
    print(f"rank {rank}: {len(docs)} docs, {len(local)} unique in shard", flush=True)

    shard_keys = [None] * world
    dist.all_gather_object(shard_keys, sorted(local))
    elsewhere = set()
    for r, keys in enumerate(shard_keys):
        if r != rank:
            elsewhere.update(keys)

    kept = {h: d for h, d in local.items() if h not in elsewhere}

    kept_keys = [None] * world
    dist.all_gather_object(kept_keys, sorted(kept))
    distinct_before = set().union(*map(set, shard_keys))
    flat_after = [h for keys in kept_keys for h in keys]
    if len(flat_after) != len(set(flat_after)):
        raise RuntimeError("duplicate documents survived deduplication")
    missing = distinct_before - set(flat_after)
    if missing:
        raise RuntimeError(
            f"deduplication lost {len(missing)} of {len(distinct_before)} distinct documents")

    os.makedirs("dedup", exist_ok=True)
    with open(os.path.join("dedup", f"part-{rank:05d}.jsonl"), "w") as f:
        for h, d in sorted(kept.items()):
            f.write(json.dumps({"id": h, "text": d}) + "\n")
    dist.barrier()
    if rank == 0:
        print("dedup done:", len(flat_after), "documents kept", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
