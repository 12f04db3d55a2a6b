"""Rank 0 tokenises the validation set in a helper process and shares the result with every rank."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def tokenise(out):
    torch.manual_seed(0)
    out.put(torch.randint(0, 1000, (256, 32)))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    tokens = torch.empty(256, 32, dtype=torch.int64)
    if rank == 0:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        helper = ctx.Process(target=tokenise, args=(q,))
        helper.start()
        helper.join()  # wait for the helper to finish before reading its result
        tokens = q.get(timeout=30)
    dist.broadcast(tokens, 0)
    print(f"rank {rank}: {tokens.shape[0]} validation rows, checksum {int(tokens.sum())}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
