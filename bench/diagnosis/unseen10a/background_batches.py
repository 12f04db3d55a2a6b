"""Training with batches prepared by a background thread, stopped after a fixed number of optimizer steps."""
import datetime
import os
import queue
import threading

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

EPOCHS = 3
BATCHES_PER_EPOCH = 50
MAX_STEPS = 60


def produce(q, rank):
    g = torch.Generator().manual_seed(rank)
    for epoch in range(EPOCHS):
        for _ in range(BATCHES_PER_EPOCH):
            x = torch.randn(32, 16, generator=g)
            q.put((x, x.sum(1, keepdim=True)))
    q.put(None)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = queue.Queue(maxsize=8)
    threading.Thread(target=produce, args=(batches, rank), name="batch-producer").start()
    step = 0
    while step < MAX_STEPS:
        item = batches.get()
        if item is None:
            break
        x, y = item
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        step += 1
        if rank == 0 and step % 20 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    print(f"rank {rank}: training finished after {step} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
