"""Consolidate a magnitude-pruned, rank-sharded checkpoint into one flat release file.

Each rank owns a contiguous slice of the flattened parameters (as saved by the sharded
optimizer), prunes it to the target sparsity, and the slices are assembled on every rank.
The assembled file is verified against each owner's shard checksum before it is written.
"""
import datetime
import hashlib
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn


def build_model():
    torch.manual_seed(11)
    return nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def shard_bounds(total, rank, world):
    per = (total + world - 1) // world
    start = min(rank * per, total)
    return start, min(start + per, total)


def prune(shard, sparsity):
    k = int(shard.numel() * sparsity)
    if k == 0:
        return shard.clone()
    threshold = shard.abs().kthvalue(k).values
    mask = (shard.abs() > threshold).to(shard.dtype)
    return shard * mask


def digest(t):
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    model = build_model()
    flat = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
    start, end = shard_bounds(flat.numel(), rank, world)
    shard = prune(flat[start:end], sparsity=0.5)
    local_digest = digest(shard)

    full = torch.zeros_like(flat)
    full[start:end] = shard
    dist.all_reduce(full)

    check = digest(full[start:end])
    bad = torch.tensor([int(check != local_digest)])
    dist.all_reduce(bad)
    print(f"[rank {rank}] slice {start}:{end} nnz {int((shard != 0).sum())} "
          f"owner {local_digest[:12]} assembled {check[:12]}", flush=True)
    if bad.item():
        raise RuntimeError(f"{int(bad.item())} shard(s) do not match their owner's checksum after consolidation; "
                           "not writing a corrupted release")

    if rank == 0:
        torch.save({"flat": full, "numel": flat.numel()}, "pruned_release.pt")
        with open("pruned_release.json", "w") as f:
            json.dump({"sparsity": float((full == 0).float().mean()), "sha256": digest(full)}, f)
        print("[rank 0] consolidated release written", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
