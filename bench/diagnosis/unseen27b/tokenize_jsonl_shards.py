"""Tokenize a JSONL corpus in parallel: every rank takes a contiguous byte range of the file,
tokenizes its documents into a uint32 token stream and writes one output shard plus a manifest."""
import argparse
import json
import os
import random
import zlib
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

WORDS = ["the", "model", "data", "token", "shard", "rank", "node", "batch", "layer", "loss",
         "gradient", "vector", "sample", "corpus", "merge", "index", "field", "value", "step"]


def ensure_corpus(path, n_docs, seed=1234):
    if os.path.exists(path):
        return
    rng = random.Random(seed)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for i in range(n_docs):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120)))
            f.write(json.dumps({"id": i, "source": "synthetic", "text": text}) + "\n")
    os.replace(tmp, path)


def tokenize(text, vocab_size):
    return [zlib.crc32(w.encode()) % vocab_size for w in text.split()]


def read_byte_range(path, start, end):
    docs = []
    with open(path, "rb") as f:
        f.seek(start)
        while f.tell() < end:
            line = f.readline()
            if not line:
                break
            docs.append(json.loads(line))
    return docs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", default="corpus.jsonl")
    p.add_argument("--docs", type=int, default=4000)
    p.add_argument("--vocab-size", type=int, default=32000)
    p.add_argument("--out", default="tokenized")
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()

    ensure_corpus(args.corpus, args.docs)
    size = os.path.getsize(args.corpus)
    start, end = rank * size // world, (rank + 1) * size // world

    docs = read_byte_range(args.corpus, start, end)
    ids, lengths = [], []
    for d in docs:
        toks = tokenize(d["text"], args.vocab_size)
        ids.extend(toks)
        lengths.append(len(toks))

    os.makedirs(args.out, exist_ok=True)
    shard = os.path.join(args.out, f"tokens-{rank:05d}-of-{world:05d}.bin")
    np.asarray(ids, dtype=np.uint32).tofile(shard)

    stats = torch.tensor([len(docs), len(ids)], dtype=torch.long)
    dist.all_reduce(stats)
    if stats[0].item() != args.docs:
        raise RuntimeError(f"tokenized {stats[0].item()} documents, corpus has {args.docs}")

    with open(os.path.join(args.out, f"manifest-{rank:05d}.json"), "w") as f:
        json.dump({"shard": os.path.basename(shard), "docs": len(docs), "tokens": len(ids),
                   "first_id": docs[0]["id"] if docs else None}, f)
    if rank == 0:
        print(f"tokenized {stats[0].item()} docs / {stats[1].item()} tokens over {world} ranks", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
