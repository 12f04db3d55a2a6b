"""Export a row-sharded embedding table as per-rank release shards plus a manifest.

Every rank rebuilds the trained table from the run's seed, writes the rows it serves in
production to shard-XXXXX.pt, and the job checks the artifact budget before publishing.
"""
import argparse
import datetime
import hashlib
import json
import os

import torch
import torch.distributed as dist


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=40000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--out", default="release_shards")
    p.add_argument("--overhead", type=float, default=0.05)
    return p.parse_args()


def build_table(rows, dim):
    g = torch.Generator().manual_seed(1234)
    table = torch.randn(rows, dim, generator=g) * 0.02
    table[0].zero_()
    return table


def row_range(rows, rank, world):
    per = (rows + world - 1) // world
    start = min(rank * per, rows)
    return start, min(start + per, rows)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    args = parse_args()
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    table = build_table(args.rows, args.dim)
    start, end = row_range(args.rows, rank, world)
    shard = table[start:end]

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"shard-{rank:05d}-of-{world:05d}.pt")
    torch.save({"weight": shard, "row_start": start, "row_end": end}, path)

    nbytes = os.path.getsize(path)
    digest = sha256_file(path)
    print(f"[rank {rank}] rows {start}:{end} -> {path} ({nbytes} bytes, sha256 {digest[:12]})", flush=True)

    sizes = torch.tensor([nbytes], dtype=torch.int64)
    dist.all_reduce(sizes)
    total = int(sizes.item())
    payload = args.rows * args.dim * table.element_size()
    budget = int(payload * (1 + args.overhead)) + 4096 * world
    if total > budget:
        raise RuntimeError(
            f"release shards total {total} bytes, over the budget of {budget} bytes "
            f"for a {args.rows}x{args.dim} table ({payload} bytes of weights)")

    entries = [None] * world
    dist.all_gather_object(entries, {"file": os.path.basename(path), "rows": [start, end],
                                     "bytes": nbytes, "sha256": digest})
    if rank == 0:
        manifest = {"table": [args.rows, args.dim], "dtype": str(table.dtype), "shards": entries}
        with open(os.path.join(args.out, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=2)
        print(f"[rank 0] manifest written: {world} shards, {total} bytes", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
