"""Quality filtering step: every rank scores the documents of its source file with cheap text
statistics, the (doc id, score) table of all ranks is gathered, a global score threshold keeps
the best fraction of the corpus, and rank 0 writes the keep-list used by the next stage."""
import json
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

KEEP_FRACTION = 0.7
ID_BITS = 25


def read_source(source_idx, n=3000):
    rng = np.random.default_rng(source_idx)
    docs = []
    for i in range(n):
        length = int(rng.integers(5, 400))
        vocab = int(rng.integers(20, 2000))
        docs.append({"doc_id": (source_idx << ID_BITS) | i,
                     "tokens": rng.integers(0, vocab, length)})
    return docs


def features(doc):
    toks = doc["tokens"]
    uniq = len(np.unique(toks)) / len(toks)
    return np.array([np.log1p(len(toks)), uniq, float(np.mean(toks < 100))], dtype=np.float32)


def score(feats):
    w = torch.tensor([0.6, 1.5, -0.8])
    return torch.sigmoid(feats @ w - 2.0)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()

    docs = read_source(rank)
    feats = torch.from_numpy(np.stack([features(d) for d in docs]))
    scores = score(feats)
    ids = torch.tensor([d["doc_id"] for d in docs])

    table = torch.stack([ids.to(scores.dtype), scores], dim=1)
    gathered = [torch.empty_like(table) for _ in range(world)]
    dist.all_gather(gathered, table)
    full = torch.cat(gathered)

    threshold = torch.quantile(full[:, 1], 1.0 - KEEP_FRACTION).item()
    mine = int((scores >= threshold).sum())
    print(f"rank {rank}: threshold {threshold:.4f}, keeping {mine}/{len(docs)}", flush=True)

    if rank == 0:
        all_ids = full[:, 0].long()
        if all_ids.unique().numel() != all_ids.numel():
            raise RuntimeError(f"doc id table has duplicates: {all_ids.numel()} rows, "
                               f"{all_ids.unique().numel()} distinct ids")
        keep = all_ids[full[:, 1] >= threshold].tolist()
        os.makedirs("filtered", exist_ok=True)
        with open("filtered/keep_ids.json", "w") as f:
            json.dump({"threshold": threshold, "num_kept": len(keep), "doc_ids": keep}, f)
        print(f"wrote keep-list with {len(keep)} of {len(all_ids)} documents", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
