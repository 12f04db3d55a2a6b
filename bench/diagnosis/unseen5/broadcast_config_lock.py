"""Rank 0 builds the run configuration (with a tokenizer) and shares it with broadcast_object_list."""
import argparse
import os
import threading
from datetime import timedelta

import torch.distributed as dist


class CharTokenizer:
    def __init__(self, alphabet):
        self.alphabet = alphabet
        self._cache = {}
        self._cache_lock = threading.Lock()   # the tokenizer is used from loader threads

    def encode(self, text):
        with self._cache_lock:
            if text not in self._cache:
                self._cache[text] = [self.alphabet.index(c) for c in text if c in self.alphabet]
            return self._cache[text]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    args = ap.parse_args()
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    box = [None]
    if args.rank == 0:
        box[0] = {"lr": 3e-4, "batch": 32, "tokenizer": CharTokenizer("abcdefghijklmnopqrstuvwxyz ")}
    dist.broadcast_object_list(box, src=0)
    cfg = box[0]
    print(f"rank {args.rank}: lr {cfg['lr']} encodes {cfg['tokenizer'].encode('hello world')}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
