"""Build a shared categorical vocabulary (store codes, product families) for the tabular
demand model, then encode every rank's rows with the global codes."""
import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist

COLUMNS = ["store_code", "family", "units"]


def init():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def read_shard(rank, world_size, n_rows=400):
    # rows come from the export ordered by store opening date; each rank reads a block
    rng = random.Random(1234)
    rows = []
    total = n_rows * world_size
    for i in range(total):
        if i < total * 0.6:
            store = str(1000 + rng.randrange(300))
        else:
            store = "B" + str(rng.randrange(40)).zfill(3)
        family = rng.choice(["GROCERY", "DAIRY", "BEVERAGES", "CLEANING", "PRODUCE"])
        units = f"{rng.uniform(0, 50):.2f}"
        rows.append(",".join([store, family, units]))
    lo, hi = rank * n_rows, (rank + 1) * n_rows
    return rows[lo:hi]


def parse_value(text):
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def infer_and_parse(lines):
    raw = [line.split(",") for line in lines]
    table = {}
    for j, name in enumerate(COLUMNS):
        col = [r[j] for r in raw]
        if all(c.lstrip("-").isdigit() for c in col):
            table[name] = [int(c) for c in col]
        else:
            table[name] = [parse_value(c) if name == "units" else c for c in col]
    return table


def global_vocab(values, world_size):
    local = sorted(set(values))
    gathered = [None] * world_size
    dist.all_gather_object(gathered, local)
    merged = set()
    for part in gathered:
        merged.update(part)
    return {v: i for i, v in enumerate(sorted(merged))}


def main():
    rank, world_size = init()
    table = infer_and_parse(read_shard(rank, world_size))
    vocabs = {}
    for name in ["store_code", "family"]:
        vocabs[name] = global_vocab(table[name], world_size)
        print(f"rank {rank}: {name} vocabulary size {len(vocabs[name])}", flush=True)
    codes = torch.stack([
        torch.tensor([vocabs[n][v] for v in table[n]], dtype=torch.long)
        for n in ["store_code", "family"]
    ], dim=1)
    units = torch.tensor(table["units"], dtype=torch.float32)
    counts = torch.zeros(len(vocabs["family"]))
    counts.index_add_(0, codes[:, 1], units)
    dist.all_reduce(counts)
    if rank == 0:
        print("units per family:", [round(x, 1) for x in counts.tolist()], flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
