import io
import json
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

DIM = 64
DOCS_PER_RANK = 500
QUERIES_PER_RANK = 32
TOP_K = 5


def setup():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def load_catalog(world):
    rng = np.random.default_rng(1234)
    n = DOCS_PER_RANK * world
    doc_ids = rng.permutation(10_000_000)[:n] + 1_000_000
    titles = {int(d): f"passage-{int(d)}" for d in doc_ids}
    return doc_ids.tolist(), titles


def broadcast_json(obj, rank):
    if rank == 0:
        payload = torch.frombuffer(bytearray(json.dumps(obj).encode()), dtype=torch.uint8)
        size = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        size = torch.zeros(1, dtype=torch.int64)
    dist.broadcast(size, src=0)
    if rank != 0:
        payload = torch.empty(int(size.item()), dtype=torch.uint8)
    dist.broadcast(payload, src=0)
    if rank == 0:
        return obj
    return json.loads(bytes(payload.tolist()).decode())


def build_shard(rank, doc_ids):
    g = torch.Generator().manual_seed(100 + rank)
    ids = torch.tensor(doc_ids[rank * DOCS_PER_RANK:(rank + 1) * DOCS_PER_RANK], dtype=torch.int64)
    emb = F.normalize(torch.randn(len(ids), DIM, generator=g), dim=1)
    return ids, emb


def search(queries, ids, emb):
    scores = queries @ emb.T
    top_s, top_i = scores.topk(TOP_K, dim=1)
    return top_s, ids[top_i]


def main():
    rank, world = setup()
    catalog = load_catalog(world) if rank == 0 else None
    catalog = broadcast_json(catalog, rank)
    doc_ids, titles = catalog
    ids, emb = build_shard(rank, doc_ids)

    g = torch.Generator().manual_seed(7)
    all_queries = F.normalize(torch.randn(QUERIES_PER_RANK * world, DIM, generator=g), dim=1)
    local_s, local_ids = search(all_queries, ids, emb)

    gathered_s = [torch.empty_like(local_s) for _ in range(world)]
    gathered_ids = [torch.empty_like(local_ids) for _ in range(world)]
    dist.all_gather(gathered_s, local_s)
    dist.all_gather(gathered_ids, local_ids)
    cand_s = torch.cat(gathered_s, dim=1)
    cand_ids = torch.cat(gathered_ids, dim=1)
    best_s, pos = cand_s.topk(TOP_K, dim=1)
    best_ids = cand_ids.gather(1, pos)

    mine = range(rank * QUERIES_PER_RANK, (rank + 1) * QUERIES_PER_RANK)
    answers = []
    for q in mine:
        hits = [titles[d] for d in best_ids[q].tolist()]
        answers.append({"query": q, "hits": hits, "scores": [round(s, 4) for s in best_s[q].tolist()]})

    out = io.StringIO()
    for a in answers:
        out.write(json.dumps(a) + "\n")
    count = torch.tensor([len(answers)])
    dist.all_reduce(count)
    if rank == 0:
        print(f"answered {int(count.item())} queries; first: {answers[0]['hits'][:2]}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
