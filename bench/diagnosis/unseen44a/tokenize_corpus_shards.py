"""Tokenise a raw text corpus into fixed-length uint16 token blocks before training.
Every rank tokenises its share of the input shards into a node-local cache folder,
then the ranks agree on the total block count used to size the training schedule."""
import fcntl
import os
import random
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

CACHE_DIR = "token_cache"
BLOCK = 128
NUM_SHARDS = 8
ALPHABET = "abcdefghijklmnopqrstuvwxyz "


class ByteTokenizer:
    def __init__(self):
        self.vocab = {ch: i + 3 for i, ch in enumerate(ALPHABET)}
        self.bos, self.eos = 1, 2

    def encode(self, text):
        return [self.bos] + [self.vocab[c] for c in text if c in self.vocab] + [self.eos]


class CacheWriter:
    """Owns the token cache folder for the duration of the job."""

    def __init__(self, root):
        os.makedirs(root, exist_ok=True)
        self.root = root
        self._lock = open(os.path.join(root, ".writer.lock"), "w")
        fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._lock.write(str(os.getpid()))
        self._lock.flush()

    def write(self, name, blocks):
        tmp = os.path.join(self.root, name + ".tmp")
        np.save(tmp, blocks)
        os.replace(tmp + ".npy", os.path.join(self.root, name + ".npy"))

    def close(self):
        fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
        self._lock.close()


def read_shard(shard_id):
    rng = random.Random(shard_id)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(200, 900))) for _ in range(150)]


def to_blocks(ids):
    n = len(ids) // BLOCK
    return np.asarray(ids[: n * BLOCK], dtype=np.uint16).reshape(n, BLOCK)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    writer = CacheWriter(CACHE_DIR)
    tok = ByteTokenizer()
    n_blocks = 0
    for shard_id in range(rank, NUM_SHARDS, world):
        ids = []
        for doc in read_shard(shard_id):
            ids.extend(tok.encode(doc))
        blocks = to_blocks(ids)
        writer.write(f"shard{shard_id:03d}", blocks)
        n_blocks += blocks.shape[0]

    total = torch.tensor([n_blocks], dtype=torch.int64)
    dist.all_reduce(total)
    if rank == 0:
        print(f"tokenised {NUM_SHARDS} shards into {int(total)} blocks of {BLOCK}", flush=True)
    dist.barrier()
    writer.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
