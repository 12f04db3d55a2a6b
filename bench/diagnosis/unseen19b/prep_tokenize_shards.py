import os
import random
import struct
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

DATA_DIR = Path(os.environ.get("DATA_DIR", "data"))
PREFIX = DATA_DIR / "corpus_text_document"
N_DOCS = 10000


def documents():
    rng = random.Random(11)
    alphabet = "abcdefghijklmnopqrstuvwxyz "
    for _ in range(N_DOCS):
        yield "".join(rng.choice(alphabet) for _ in range(rng.randint(80, 200)))


def tokenize(text):
    ids, word = [], 0
    for ch in text:
        if ch == " ":
            ids.append(word % 32000)
            word = 0
        else:
            word = word * 31 + ord(ch)
    ids.append(word % 32000)
    return ids


def build_indexed_dataset(prefix):
    sizes = []
    with open(f"{prefix}.bin", "wb") as fbin:
        for doc in documents():
            ids = tokenize(doc)
            fbin.write(np.asarray(ids, dtype=np.uint16).tobytes())
            sizes.append(len(ids))
    with open(f"{prefix}.idx", "wb") as fidx:
        fidx.write(struct.pack("<Q", len(sizes)))
        fidx.write(np.asarray(sizes, dtype=np.int64).tobytes())


def load_indexed_dataset(prefix):
    with open(f"{prefix}.idx", "rb") as fidx:
        (n,) = struct.unpack("<Q", fidx.read(8))
        sizes = np.frombuffer(fidx.read(8 * n), dtype=np.int64)
    tokens = np.memmap(f"{prefix}.bin", dtype=np.uint16, mode="r")
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return tokens, offsets


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    if local_rank == 0:
        t0 = time.time()
        build_indexed_dataset(PREFIX)
        print(f"[{rank}] built {PREFIX} in {time.time() - t0:.1f}s", flush=True)
    else:
        while not os.path.exists(f"{PREFIX}.bin"):
            time.sleep(0.1)

    tokens, offsets = load_indexed_dataset(PREFIX)
    docs = range(rank, len(offsets) - 1, world)
    n_tok = sum(int(offsets[i + 1] - offsets[i]) for i in docs)
    checksum = sum(int(tokens[offsets[i]]) for i in docs)
    stats = torch.tensor([n_tok, checksum, len(docs)], dtype=torch.float64)
    dist.all_reduce(stats)
    if rank == 0:
        print(f"corpus: {int(stats[2])} docs, {int(stats[0])} tokens, checksum {int(stats[1])}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
