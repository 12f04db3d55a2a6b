"""Feature extraction for a retrieval model: a shared in-memory cache of per-document features is warmed in a
background thread while a multiprocessing Pool featurises the training documents; then every rank trains."""
import multiprocessing
import os
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist


class FeatureCache:
    """Document id -> feature vector; filled from 'disk' by a background warm-up, read by the featurisers."""

    def __init__(self):
        self.lock = threading.Lock()
        self.table = {}

    def _load(self, doc_id):
        g = torch.Generator().manual_seed(doc_id)
        time.sleep(0.002)  # reading the stored vector
        return torch.randn(64, generator=g)

    def warm(self, doc_ids):
        # hold the lock for the whole batch so readers never see a half-filled table
        with self.lock:
            for doc_id in doc_ids:
                self.table[doc_id] = self._load(doc_id)

    def get(self, doc_id):
        with self.lock:
            if doc_id not in self.table:
                self.table[doc_id] = self._load(doc_id)
            return self.table[doc_id]


CACHE = FeatureCache()


def featurise(doc_id):
    neighbours = [CACHE.get(n) for n in (doc_id, doc_id + 1, doc_id + 2)]
    return torch.stack(neighbours).mean(0)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    # warm the popular documents in the background while the pool starts
    threading.Thread(target=CACHE.warm, args=(range(5000),), daemon=True).start()
    my_docs = list(range(rank, 400, world))
    with multiprocessing.Pool(2) as pool:
        feats = torch.stack(pool.map(featurise, my_docs, chunksize=20))
    print(f"rank {rank}: featurised {len(feats)} documents", flush=True)
    torch.manual_seed(0)
    proj = torch.nn.Linear(64, 16)
    opt = torch.optim.SGD(proj.parameters(), lr=0.05)
    for step in range(20):
        z = torch.nn.functional.normalize(proj(feats), dim=1)
        loss = -(z[:-1] * z[1:]).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        for p in proj.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
    print(f"rank {rank}: done, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
