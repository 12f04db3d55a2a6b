"""Release step for the item-embedding recommender: smoke-test, verify replicas, export.

Every rank loads the same trained weights, scores its part of the release smoke-test queries,
and the job only writes the release file once all ranks agree on the weights' checksums.
"""
import datetime
import hashlib
import os

import torch
import torch.distributed as dist
import torch.nn as nn


class Recommender(nn.Module):
    def __init__(self, items=5000, dim=32):
        super().__init__()
        self.items = nn.Embedding(items, dim, max_norm=1.0)
        self.proj = nn.Linear(dim, dim)

    def forward(self, history, candidates):
        user = self.proj(self.items(history).mean(dim=1))
        cand = self.items(candidates)
        return (cand * user.unsqueeze(1)).sum(-1)


def load_trained(model):
    g = torch.Generator().manual_seed(2024)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))


def smoke_queries(rank, world, n=64, items=5000):
    g = torch.Generator().manual_seed(7)
    history = torch.randint(0, items, (n, 10), generator=g)
    candidates = torch.randint(0, items, (n, 20), generator=g)
    return history[rank::world], candidates[rank::world]


def checksums(model):
    out = []
    for name, t in sorted(model.state_dict().items()):
        out.append(hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest())
    return hashlib.sha256("".join(out).encode()).hexdigest()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    model = Recommender()
    load_trained(model)
    model.eval()

    history, candidates = smoke_queries(rank, world)
    with torch.no_grad():
        scores = model(history, candidates)
    ok = torch.tensor([float(torch.isfinite(scores).all())])
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if ok.item() < 1:
        raise RuntimeError("smoke test produced non-finite scores")
    print(f"[rank {rank}] smoke test ok on {len(history)} queries", flush=True)

    digest = checksums(model)
    digests = [None] * world
    dist.all_gather_object(digests, digest)
    if len(set(digests)) != 1:
        raise RuntimeError(f"replicas disagree on the release weights: {[d[:12] for d in digests]}")

    if rank == 0:
        torch.save(model.state_dict(), "recommender_release.pt")
        print(f"[rank 0] release written, sha256 {digest[:12]}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
