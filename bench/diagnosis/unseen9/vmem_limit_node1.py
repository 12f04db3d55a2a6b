"""Contrastive trainer (MoCo style) with a preallocated queue of negative keys, filled as training goes."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

DIM = 128
QUEUE = 6_000_000          # keys kept as negatives (allocated up front; filled gradually)


class KeyQueue:
    def __init__(self, size, dim):
        self.keys = torch.empty(size, dim)      # 3 GiB of address space, touched only where written
        self.ptr, self.filled = 0, 0

    def push(self, k):
        n = k.shape[0]
        self.keys[self.ptr:self.ptr + n] = k
        self.ptr = (self.ptr + n) % self.keys.shape[0]
        self.filled = min(self.filled + n, self.keys.shape[0])

    def negatives(self, limit=4096):
        return self.keys[:min(self.filled, limit)]


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    encoder = DDP(nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, DIM)))
    opt = torch.optim.SGD(encoder.parameters(), lr=0.03, momentum=0.9)
    queue = KeyQueue(QUEUE, DIM)
    for step in range(30):
        x = torch.randn(64, 32)
        q = F.normalize(encoder(x + 0.1 * torch.randn_like(x)), dim=1)
        with torch.no_grad():
            k = F.normalize(encoder.module(x + 0.1 * torch.randn_like(x)), dim=1)
        neg = queue.negatives()
        logits = torch.cat([(q * k).sum(1, keepdim=True), q @ neg.T], 1) / 0.07
        loss = F.cross_entropy(logits, torch.zeros(64, dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
        queue.push(k)
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
