"""A custom C tokenizer (here libc abort) called on rank 1's data path aborts the process with SIGABRT."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()
import ctypes

libc = ctypes.CDLL(None)


def tokenize(text, r):
    if r == 1 and "\x00" in text:  # the 'native tokenizer' aborts on a NUL byte in rank 1's shard
        libc.abort()
    return torch.tensor([float(len(text))])


texts = ["hello world", "ok"] if rank == 0 else ["hello", "bad\x00record"]
for step, text in enumerate(texts):
    t = tokenize(text, rank)
    dist.all_reduce(t)
    print(f"rank {rank}: step {step} {t.item()}", flush=True)
dist.destroy_process_group()
