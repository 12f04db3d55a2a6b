"""Shuffle JSON records so that every record lands on the rank that owns its dedup key.

Ownership is by the record's normalised url hash. Records are serialised as JSON lines,
exchanged with all_to_all_single (counts first, then bytes), and parsed on the owner.
"""
import datetime
import hashlib
import json
import os

import torch
import torch.distributed as dist

RECORDS_PER_RANK = 300


def make_records(rank, n):
    return [{"url": f"https://site{(rank * 7 + i) % 97}.example/page/{i % 150}",
             "text": f"body {rank}-{i} " + "lorem " * (i % 5), "src": rank} for i in range(n)]


def owner_of(url, world):
    key = url.lower().rstrip("/")
    return int(hashlib.md5(key.encode()).hexdigest()[:12], 16) % world


def exchange(payloads, world):
    send = torch.cat([torch.frombuffer(bytearray(p), dtype=torch.uint8) if p
                      else torch.empty(0, dtype=torch.uint8) for p in payloads])
    send_counts = torch.tensor([len(p) for p in payloads], dtype=torch.int64)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    recv = torch.empty(int(recv_counts.sum()), dtype=torch.uint8)
    dist.all_to_all_single(recv, send, recv_counts.tolist(), send_counts.tolist())
    return bytes(recv.numpy())


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    buckets = [[] for _ in range(world)]
    for rec in make_records(rank, RECORDS_PER_RANK):
        buckets[owner_of(rec["url"], world)].append(rec)
    payloads = ["\n".join(json.dumps(r, sort_keys=True) for r in b).encode() for b in buckets]

    blob = exchange(payloads, world)
    owned = [json.loads(line) for line in blob.decode("utf-8").split("\n") if line.strip()]
    assert all(owner_of(r["url"], world) == rank for r in owned)

    keep = {}
    for r in owned:
        keep.setdefault(r["url"].lower().rstrip("/"), r)
    with open(f"owned_records.rank{rank}.jsonl", "w") as f:
        for r in keep.values():
            f.write(json.dumps(r) + "\n")
    stats = torch.tensor([len(owned), len(keep)], dtype=torch.int64)
    dist.all_reduce(stats)
    if rank == 0:
        print(f"records after shuffle: {int(stats[0])}, unique urls: {int(stats[1])}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
