"""Build the per-rank digest index: every rank ends up with a sorted-by-arrival list of the
sha1 digests it owns (digest mod world) and writes it as a plain text index file.

Digests this rank owns itself are kept in place; the others are packed as fixed 20-byte rows
and exchanged with all_to_all_single.
"""
import datetime
import hashlib
import os

import torch
import torch.distributed as dist

DIGEST_BYTES = 20


def shard_texts(rank, n=400):
    return [f"item-{(rank * 211 + i * 7) % 1000}" for i in range(n)]


def owner(hexdigest, world):
    return int(hexdigest[-8:], 16) % world


def exchange_rows(per_dest, world):
    send_counts = torch.tensor([len(rows) for rows in per_dest], dtype=torch.int64)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    flat = b"".join(b"".join(rows) for rows in per_dest)
    send = torch.tensor(list(flat), dtype=torch.uint8).view(-1, DIGEST_BYTES)
    recv = torch.empty(int(recv_counts.sum()), DIGEST_BYTES, dtype=torch.uint8)
    dist.all_to_all_single(recv, send, recv_counts.tolist(), send_counts.tolist())
    return [bytes(row.tolist()) for row in recv]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    digests = {hashlib.sha1(t.encode()).hexdigest() for t in shard_texts(rank)}
    kept = [d for d in sorted(digests) if owner(d, world) == rank]
    per_dest = [[] for _ in range(world)]
    for d in sorted(digests):
        o = owner(d, world)
        if o != rank:
            per_dest[o].append(bytes.fromhex(d))

    received = exchange_rows(per_dest, world)
    keys = list(dict.fromkeys(kept + received))

    with open(f"digest_index.rank{rank}.txt", "w") as f:
        f.write("\n".join(keys) + "\n")
    total = torch.tensor([len(keys)])
    dist.all_reduce(total)
    if rank == 0:
        print(f"index entries across ranks: {int(total)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
