import hashlib
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F

DIM = 32
NLIST = 16
ROWS_PER_RANK = 800
ITERS = 8
OUT_DIR = os.environ.get("INDEX_DIR", "ivf_index")


def setup():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def local_embeddings(rank):
    g = torch.Generator().manual_seed(2024 + rank)
    centers = torch.randn(NLIST, DIM, generator=torch.Generator().manual_seed(5)) * 3
    assign = torch.randint(0, NLIST, (ROWS_PER_RANK,), generator=g)
    return F.normalize(centers[assign] + torch.randn(ROWS_PER_RANK, DIM, generator=g), dim=1)


def train_centroids(x):
    centroids = x[:NLIST].clone()
    dist.broadcast(centroids, src=0)
    for _ in range(ITERS):
        assign = torch.cdist(x, centroids).argmin(dim=1)
        sums = torch.zeros(NLIST, DIM).index_add_(0, assign, x)
        counts = torch.bincount(assign, minlength=NLIST).to(torch.float32)
        dist.all_reduce(sums)
        dist.all_reduce(counts)
        centroids = torch.where(counts[:, None] > 0, sums / counts.clamp(min=1)[:, None], centroids)
    return centroids


def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def main():
    rank, world = setup()
    x = local_embeddings(rank)
    centroids = train_centroids(x)
    lists = torch.cdist(x, centroids).argmin(dim=1)

    os.makedirs(OUT_DIR, exist_ok=True)
    quantizer_path = os.path.join(OUT_DIR, f"quantizer_r{rank}.pt")
    torch.save({"centroids": centroids, "nlist": NLIST, "dim": DIM}, quantizer_path)
    torch.save({"vectors": x, "lists": lists}, os.path.join(OUT_DIR, f"lists_r{rank}.pt"))

    digest = file_digest(quantizer_path)
    digests = [None] * world
    dist.all_gather_object(digests, digest)
    if len(set(digests)) != 1:
        raise RuntimeError(f"coarse quantizer replicas differ across ranks: {digests}")

    sizes = torch.bincount(lists, minlength=NLIST)
    dist.all_reduce(sizes)
    if rank == 0:
        manifest = {"nlist": NLIST, "dim": DIM, "world": world, "quantizer_sha256": digest,
                    "list_sizes": sizes.tolist()}
        with open(os.path.join(OUT_DIR, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
        print(f"published IVF index: {int(sizes.sum())} vectors in {NLIST} lists")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
