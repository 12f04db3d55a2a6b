import datetime
import json
import os

import numpy as np
import torch
import torch.distributed as dist

VOCAB = [chr(c) for c in range(97, 123)] + [" ", ".", ","]
STOI = {ch: i + 3 for i, ch in enumerate(VOCAB)}
BOS, EOS, UNK = 0, 1, 2


def make_corpus(n_docs, seed=1234):
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n_docs):
        n = int(rng.integers(20, 200))
        docs.append("".join(rng.choice(VOCAB, size=n)))
    return docs


def encode(text):
    return [BOS] + [STOI.get(ch, UNK) for ch in text] + [EOS]


def setup():
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    node_rank = int(os.environ.get("NODE_RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    rank = node_rank * local_world + local_rank
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timeout)
    return rank, world_size


def main():
    rank, world_size = setup()
    docs = make_corpus(4000)
    mine = docs[rank::world_size]
    ids = [encode(d) for d in mine]
    flat = np.concatenate([np.asarray(x, dtype=np.int64) for x in ids])
    n_tokens = torch.tensor([flat.size, len(ids)], dtype=torch.int64)
    dist.all_reduce(n_tokens)
    hist = torch.bincount(torch.from_numpy(flat), minlength=len(VOCAB) + 3)
    dist.all_reduce(hist)
    shard_name = f"tokens_{rank:05d}_of_{world_size:05d}.npy"
    np.save(shard_name, flat)
    if rank == 0:
        meta = {
            "total_tokens": int(n_tokens[0]),
            "total_docs": int(n_tokens[1]),
            "unk_rate": float(hist[UNK]) / float(n_tokens[0]),
            "shards": world_size,
        }
        with open("tokenize_meta.json", "w") as f:
            json.dump(meta, f, indent=2)
        print(json.dumps(meta), flush=True)
    dist.barrier()
    print(f"rank {rank}: wrote {shard_name} ({flat.size} tokens)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
