import io
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

DIM = 48
N_DOCS = 4000
TOP_K = 10


def setup():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def build_index():
    rng = np.random.default_rng(11)
    vecs = rng.standard_normal((N_DOCS, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    external_ids = rng.choice(10**9, size=N_DOCS, replace=False).astype(np.int64)
    return {
        "version": 3,
        "embeddings": torch.from_numpy(vecs),
        "external_ids": external_ids,
        "norm": "l2",
    }


def fan_out(index, rank):
    if rank == 0:
        buf = io.BytesIO()
        torch.save(index, buf)
        blob = torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)
        size = torch.tensor([blob.numel()], dtype=torch.int64)
    else:
        size = torch.zeros(1, dtype=torch.int64)
    dist.broadcast(size, src=0)
    if rank != 0:
        blob = torch.empty(int(size.item()), dtype=torch.uint8)
    dist.broadcast(blob, src=0)
    if rank == 0:
        return index
    return torch.load(io.BytesIO(blob.numpy().tobytes()), map_location="cpu")


def queries_for(rank, world, n=64):
    g = torch.Generator().manual_seed(99)
    q = F.normalize(torch.randn(n * world, DIM, generator=g), dim=1)
    return q[rank * n:(rank + 1) * n]


def main():
    rank, world = setup()
    index = build_index() if rank == 0 else None
    index = fan_out(index, rank)

    emb = index["embeddings"]
    ext = torch.from_numpy(np.asarray(index["external_ids"]))
    q = queries_for(rank, world)
    scores, pos = (q @ emb.T).topk(TOP_K, dim=1)
    hits = ext[pos]

    stats = torch.tensor([float(scores[:, 0].mean()), float(hits.numel())])
    dist.all_reduce(stats)
    if rank == 0:
        print(f"index v{index['version']}: mean top1 {stats[0].item() / world:.4f}, {int(stats[1])} hits")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
