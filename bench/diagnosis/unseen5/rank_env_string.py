"""Rank 0 writes the label vocabulary; everyone reads it after a barrier."""
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist

RANK = os.environ.get("RANK", 0)
WORLD = os.environ.get("WORLD_SIZE", 1)
LABELS = ["negative", "neutral", "positive", "mixed"]


def is_main():
    return RANK == 0


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    if is_main():
        with open("label_vocab.json", "w") as f:
            json.dump({name: i for i, name in enumerate(LABELS)}, f)
    dist.barrier()
    with open("label_vocab.json") as f:
        vocab = json.load(f)
    counts = torch.zeros(len(vocab))
    dist.all_reduce(counts)
    print(f"rank {RANK}/{WORLD}: {len(vocab)} labels", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
