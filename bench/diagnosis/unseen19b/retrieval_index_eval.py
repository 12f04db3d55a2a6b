import fcntl
import os
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

INDEX_DIR = Path(os.environ.get("INDEX_DIR", "index_cache"))
N_CENTROIDS, DIM = 64, 32


@contextmanager
def node_lock(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def corpus_embeddings(n=8000):
    g = torch.Generator().manual_seed(3)
    return torch.nn.functional.normalize(torch.randn(n, DIM, generator=g), dim=1)


def kmeans(x, k, iters=10):
    g = torch.Generator().manual_seed(5)
    cent = x[torch.randperm(len(x), generator=g)[:k]].clone()
    for _ in range(iters):
        assign = (x @ cent.T).argmax(dim=1)
        for c in range(k):
            members = x[assign == c]
            if len(members):
                cent[c] = torch.nn.functional.normalize(members.mean(0), dim=0)
    return cent, assign


def wait_for_peers(tag):
    flag = torch.ones(1)
    dist.all_reduce(flag)
    return int(flag.item())


def get_index():
    index_file = INDEX_DIR / "ivf_index.pt"
    with node_lock(INDEX_DIR / ".build.lock"):
        if not index_file.exists():
            emb = corpus_embeddings()
            cent, assign = kmeans(emb, N_CENTROIDS)
            torch.save({"emb": emb, "centroids": cent, "assign": assign}, index_file)
        ready = wait_for_peers("index-ready")
        index = torch.load(index_file)
    return index, ready


def search(index, queries, nprobe=4, k=10):
    probe = (queries @ index["centroids"].T).topk(nprobe, dim=1).indices
    hits = []
    for q, cells in zip(queries, probe):
        cand = torch.nonzero(torch.isin(index["assign"], cells)).flatten()
        scores = index["emb"][cand] @ q
        hits.append(cand[scores.topk(min(k, len(cand))).indices])
    return hits


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    index, ready = get_index()
    if rank == 0:
        print(f"index ready on {ready} ranks", flush=True)

    g = torch.Generator().manual_seed(100 + rank)
    targets = torch.randint(0, len(index["emb"]), (64,), generator=g)
    queries = torch.nn.functional.normalize(index["emb"][targets] + 0.05 * torch.randn(64, DIM, generator=g), dim=1)
    hits = search(index, queries)
    recall = sum(int(t in h) for t, h in zip(targets.tolist(), hits))
    stats = torch.tensor([recall, len(targets)], dtype=torch.float64)
    dist.all_reduce(stats)
    if rank == 0:
        print(f"recall@10 = {stats[0] / stats[1]:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
