"""Dense retrieval evaluation: encode the passage corpus in shards, search every query, report recall@k / MRR."""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self, vocab=5000, dim=48):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.proj = nn.Linear(dim, dim)

    def forward(self, tokens):
        return F.normalize(self.proj(self.emb(tokens)), dim=-1)


def synthetic_corpus(num_passages, num_queries, length=24, vocab=5000):
    g = torch.Generator().manual_seed(11)
    passages = torch.randint(0, vocab, (num_passages, length), generator=g)
    gold = torch.randint(0, num_passages, (num_queries,), generator=g)
    queries = passages[gold][:, : length // 2].clone()
    noise = torch.rand(queries.shape, generator=g) < 0.3
    queries[noise] = torch.randint(0, vocab, (int(noise.sum()),), generator=g)
    return passages, queries, gold


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=300)
    ap.add_argument("--queries", type=int, default=64)
    ap.add_argument("--k", type=int, default=100)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    enc = Encoder().eval()

    passages, queries, gold = synthetic_corpus(args.passages, args.queries)
    bounds = torch.linspace(0, args.passages, world + 1).long().tolist()
    lo, hi = bounds[rank], bounds[rank + 1]

    with torch.no_grad():
        p_emb = torch.cat([enc(passages[i:min(i + 64, hi)]) for i in range(lo, hi, 64)])
        q_emb = enc(queries)
        scores = q_emb @ p_emb.T
        top_scores, top_idx = torch.topk(scores, k=args.k, dim=1)
    top_idx = top_idx + lo
    print(f"rank {rank}: searched passages {lo}..{hi - 1}", flush=True)

    all_scores = [torch.empty_like(top_scores) for _ in range(world)]
    all_idx = [torch.empty_like(top_idx) for _ in range(world)]
    dist.all_gather(all_scores, top_scores)
    dist.all_gather(all_idx, top_idx)

    if rank == 0:
        merged_scores = torch.cat(all_scores, dim=1)
        merged_idx = torch.cat(all_idx, dim=1)
        best, pos = torch.topk(merged_scores, k=args.k, dim=1)
        ranked = torch.gather(merged_idx, 1, pos)
        hits = ranked == gold[:, None]
        recall = hits.any(dim=1).float().mean().item()
        first = hits.float().argmax(dim=1) + 1
        mrr = torch.where(hits.any(dim=1), 1.0 / first.float(), torch.zeros(1)).mean().item()
        print(f"recall@{args.k} {recall:.3f}  MRR {mrr:.3f}  ({args.queries} queries, "
              f"{args.passages} passages, {world} shards)", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
