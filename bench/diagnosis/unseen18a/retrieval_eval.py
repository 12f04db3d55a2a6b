import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

DIM = 64
DOCS_PER_RANK = 512
QUERIES = 128


class DocEncoder(nn.Module):
    def __init__(self, vocab=1000):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, DIM, mode="mean")
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, tokens):
        return F.normalize(self.proj(self.emb(tokens)), dim=1)


def compress(emb):
    scale = float(emb.abs().max()) / 127.0
    return torch.quantize_per_tensor(emb, scale=scale, zero_point=0, dtype=torch.qint8)


def gather_index(local_q, world):
    shards = [torch.empty_like(local_q) for _ in range(world)]
    dist.all_gather(shards, local_q)
    return torch.cat([s.dequantize() for s in shards], dim=0)


def recall_at_k(scores, targets, k):
    topk = scores.topk(k, dim=1).indices
    return (topk == targets.unsqueeze(1)).any(dim=1).float().mean().item()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    encoder = DocEncoder().eval()

    gen = torch.Generator().manual_seed(100 + rank)
    doc_tokens = torch.randint(0, 1000, (DOCS_PER_RANK, 24), generator=gen)
    with torch.no_grad():
        local_docs = encoder(doc_tokens)
    local_q = compress(local_docs)
    index = gather_index(local_q, world) if world > 1 else local_q.dequantize()

    qgen = torch.Generator().manual_seed(5)
    targets = torch.randint(0, DOCS_PER_RANK * world, (QUERIES,), generator=qgen)
    all_docs_tokens = [torch.randint(0, 1000, (DOCS_PER_RANK, 24), generator=torch.Generator().manual_seed(100 + r))
                       for r in range(world)]
    all_docs_tokens = torch.cat(all_docs_tokens)
    query_tokens = all_docs_tokens[targets][:, :12]
    with torch.no_grad():
        queries = encoder(query_tokens)

    scores = queries @ index.t()
    metrics = {f"recall@{k}": recall_at_k(scores, targets, k) for k in (1, 5, 10)}
    if rank == 0:
        print(json.dumps({"index_size": index.shape[0], **metrics}), flush=True)
        with open("retrieval_metrics.json", "w") as f:
            json.dump(metrics, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
