"""DDP trainer over a precomputed feature table kept in shared memory.

The feature table (normalized item embeddings) is computed once and placed in POSIX shared
memory, so the ranks attach to it instead of each holding a private copy.
Launch: torchrun --nnodes 2 --nproc-per-node N train_shm_feature_cache.py
"""
import os
from datetime import timedelta
from multiprocessing import resource_tracker, shared_memory

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

NUM_ITEMS, DIM = 20000, 32
STEPS = 25


def cache_name():
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "local")
    return f"featcache_{run_id}"[:30]


def build_table():
    gen = np.random.default_rng(7)
    table = gen.standard_normal((NUM_ITEMS, DIM)).astype(np.float32)
    table /= np.linalg.norm(table, axis=1, keepdims=True)
    return table


def open_feature_cache(rank):
    nbytes = NUM_ITEMS * DIM * 4
    if rank == 0:
        shm = shared_memory.SharedMemory(name=cache_name(), create=True, size=nbytes)
        np.ndarray((NUM_ITEMS, DIM), np.float32, buffer=shm.buf)[:] = build_table()
    dist.barrier()
    if rank != 0:
        shm = shared_memory.SharedMemory(name=cache_name())
        resource_tracker.unregister(shm._name, "shared_memory")
    table = np.ndarray((NUM_ITEMS, DIM), np.float32, buffer=shm.buf)
    return shm, torch.from_numpy(table)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    shm, table = open_feature_cache(rank)
    print(f"rank {rank}: feature table {tuple(table.shape)} attached from /dev/shm/{shm.name}", flush=True)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(2 * DIM, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        a = torch.randint(0, NUM_ITEMS, (128,), generator=gen)
        b = torch.randint(0, NUM_ITEMS, (128,), generator=gen)
        feats = torch.cat([table[a], table[b]], dim=1)
        target = (table[a] * table[b]).sum(dim=1, keepdim=True)
        loss = nn.functional.mse_loss(model(feats), target)
        opt.zero_grad()
        loss.backward()
        opt.step()

    final = loss.detach().clone()
    dist.all_reduce(final, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"final pair-similarity loss {final.item():.5f}", flush=True)
    del table
    dist.barrier()
    shm.close()
    if rank == 0:
        shm.unlink()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
