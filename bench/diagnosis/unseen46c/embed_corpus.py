"""Embed a document corpus with a small encoder, sharded over ranks, and report throughput."""
import datetime
import json
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB, DIM, SEQ = 500, 64, 32


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        layer = nn.TransformerEncoderLayer(DIM, nhead=4, dim_feedforward=128, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, num_layers=2)

    def forward(self, ids):
        h = self.enc(self.emb(ids))
        return nn.functional.normalize(h.mean(1), dim=-1)


def configure_runtime():
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    node_threads = int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))
    threads = node_threads // local_world
    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)
    return threads


def load_corpus(n_docs=96):
    rng = np.random.default_rng(11)
    return rng.integers(1, VOCAB, size=(n_docs, SEQ))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    threads = configure_runtime()

    torch.manual_seed(0)
    model = Encoder().eval()
    corpus = load_corpus()
    shard = np.array_split(np.arange(len(corpus)), world)[rank]

    t0 = time.perf_counter()
    embs = []
    for start in range(0, len(shard), 16):
        idx = shard[start:start + 16]
        embs.append(model(torch.from_numpy(corpus[idx])))
    local = torch.cat(embs)
    elapsed = time.perf_counter() - t0

    counts = torch.tensor([float(len(shard)), elapsed])
    dist.all_reduce(counts)
    np.save(f"emb_rank{rank}.npy", local.numpy())
    if rank == 0:
        print(json.dumps({"docs": int(counts[0]), "threads_per_rank": threads,
                          "docs_per_s": round(counts[0].item() / max(counts[1].item(), 1e-9) * world, 1)}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
