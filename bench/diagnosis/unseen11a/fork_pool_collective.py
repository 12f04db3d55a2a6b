"""Score predictions in parallel with a multiprocessing Pool; the scorer averages its result over the ranks."""
import multiprocessing as mp
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def score_chunk(chunk):
    # The per-chunk score is normalised by the global number of samples.
    total = torch.tensor([float(len(chunk))])
    dist.all_reduce(total)
    return float(sum(chunk)) / total.item()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    preds = torch.rand(4000).tolist()
    chunks = [preds[i:i + 1000] for i in range(0, len(preds), 1000)]
    with mp.get_context("fork").Pool(2) as pool:
        scores = pool.map(score_chunk, chunks)
    print(f"rank {rank}: score {sum(scores):.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
