"""Train a small embedding model, then evaluate retrieval recall@1 over the whole corpus on worker 0.

Started by hand on each machine:  python eval_similarity_matrix_oom.py --rank R --world-size N
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

CORPUS_PER_WORKER = 150_000
DIM = 32


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    args = parser.parse_args()
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", init_method="env://", rank=args.rank, world_size=args.world_size,
                            timeout=timeout)
    torch.manual_seed(0)
    encoder = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, DIM)))
    opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(args.rank)
    for step in range(30):
        anchor = torch.randn(64, 16, generator=g)
        positive = anchor + 0.05 * torch.randn(64, 16, generator=g)
        a, p = F.normalize(encoder(anchor), dim=1), F.normalize(encoder(positive), dim=1)
        loss = F.cross_entropy(a @ p.T / 0.1, torch.arange(64))
        opt.zero_grad()
        loss.backward()
        opt.step()

    with torch.no_grad():
        docs = torch.randn(CORPUS_PER_WORKER, 16, generator=g)
        queries = docs + 0.05 * torch.randn(CORPUS_PER_WORKER, 16, generator=g)
        doc_emb = F.normalize(encoder.module(docs), dim=1)
        query_emb = F.normalize(encoder.module(queries), dim=1)
    all_docs = [torch.empty_like(doc_emb) for _ in range(args.world_size)]
    all_queries = [torch.empty_like(query_emb) for _ in range(args.world_size)]
    dist.all_gather(all_docs, doc_emb)
    dist.all_gather(all_queries, query_emb)
    if args.rank == 0:
        corpus, asked = torch.cat(all_docs), torch.cat(all_queries)
        scores = asked @ corpus.T
        recall = (scores.argmax(1) == torch.arange(len(corpus))).float().mean().item()
        print(f"recall@1 over {len(corpus)} documents: {recall:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
