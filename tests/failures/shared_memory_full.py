"""Batches are shared with worker processes through /dev/shm, and one batch is bigger than the node's /dev/shm."""
import os

import torch

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
batch = torch.zeros(int(os.environ.get("BATCH_FLOATS", 200_000_000)))  # 800 MB: the node's /dev/shm holds 512 MiB
batch.share_memory_()  # what a DataLoader worker does to hand a batch over
print(f"rank {rank}: batch shared")
