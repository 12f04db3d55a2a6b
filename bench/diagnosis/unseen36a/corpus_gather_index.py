import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F

DIM = 32
BASE_ROWS = 700
TOP_K = 8


def setup():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Sequential(torch.nn.Linear(DIM, 64), torch.nn.GELU(), torch.nn.Linear(64, DIM))

    @torch.no_grad()
    def forward(self, x):
        return F.normalize(self.proj(x), dim=1)


def local_corpus(rank):
    g = torch.Generator().manual_seed(31 + rank)
    n = BASE_ROWS + 37 * rank
    return torch.randn(n, DIM, generator=g)


def main():
    rank, world = setup()
    enc = Encoder()
    emb = enc(local_corpus(rank))

    n_local = torch.tensor([emb.shape[0]], dtype=torch.int64)
    n_total = n_local.clone()
    dist.reduce(n_total, dst=0, op=dist.ReduceOp.SUM)
    counts = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(counts, n_local)
    max_rows = int(max(c.item() for c in counts))

    padded = torch.zeros(max_rows, DIM)
    padded[: emb.shape[0]] = emb
    slab = torch.empty(world * max_rows, DIM)
    dist.all_gather_into_tensor(slab, padded)

    full = torch.empty(int(n_total.item()), DIM)
    cursor = 0
    for r, c in enumerate(counts):
        c = int(c.item())
        full[cursor:cursor + c] = slab[r * max_rows: r * max_rows + c]
        cursor += c
    if cursor != full.shape[0]:
        raise RuntimeError(f"corpus assembly mismatch on rank {rank}: copied {cursor} rows into {full.shape[0]}")

    g = torch.Generator().manual_seed(3)
    queries = enc(torch.randn(16, DIM, generator=g))
    top_s, top_i = (queries @ full.T).topk(TOP_K, dim=1)
    check = top_s.sum().reshape(1)
    dist.all_reduce(check)
    if rank == 0:
        print(f"full index {tuple(full.shape)}; checksum {check.item():.4f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
