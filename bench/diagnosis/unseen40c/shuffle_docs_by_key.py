"""Repartition a corpus so that each document lives on the rank that owns its key
(needed before per-key grouping: near-dup clusters, per-domain statistics)."""
import datetime
import hashlib
import os

import numpy as np
import torch
import torch.distributed as dist

DOMAINS = [f"site{i}.example.org" for i in range(40)]


def synth_docs(rank, n):
    rng = np.random.default_rng(5 + rank)
    out = []
    for i in range(n):
        dom = DOMAINS[int(rng.integers(len(DOMAINS)))]
        out.append((dom, f"https://{dom}/page/{rank}/{i}", int(rng.integers(50, 4000))))
    return out


def key_hash(domain):
    raw = hashlib.blake2b(domain.encode(), digest_size=8).digest()
    return int.from_bytes(raw, "little", signed=True)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    docs = synth_docs(rank, 2000)
    hashes = torch.tensor([key_hash(d[0]) for d in docs], dtype=torch.int64)
    lengths = torch.tensor([d[2] for d in docs], dtype=torch.int64)

    owner = torch.fmod(hashes, world)
    order = torch.argsort(owner, stable=True)
    send_counts = torch.bincount(owner, minlength=world)

    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)

    payload = torch.stack([hashes[order], lengths[order]], dim=1).contiguous()
    received = torch.empty((int(recv_counts.sum()), 2), dtype=torch.int64)
    dist.all_to_all_single(received, payload,
                           output_split_sizes=recv_counts.tolist(),
                           input_split_sizes=send_counts.tolist())

    keys, inverse = torch.unique(received[:, 0], return_inverse=True)
    per_key_tokens = torch.zeros(len(keys), dtype=torch.int64).index_add_(0, inverse, received[:, 1])
    stats = torch.tensor([len(keys), int(per_key_tokens.sum())], dtype=torch.int64)
    totals = stats.clone()
    dist.all_reduce(totals)

    os.makedirs("by_domain", exist_ok=True)
    np.save(os.path.join("by_domain", f"keys-{rank:05d}.npy"), keys.numpy())
    np.save(os.path.join("by_domain", f"tokens-{rank:05d}.npy"), per_key_tokens.numpy())
    if rank == 0:
        print(f"{int(totals[0])} domains, {int(totals[1])} tokens repartitioned", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
