"""Training with a background prefetch thread that decodes records into a bounded queue."""
import json
import os
import queue
import threading
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def records(rank, n=200):
    for i in range(n):
        if rank == 1 and i == 37:
            yield '{"x": [0.1, 0.2, 0.3, 0.4], "y": 1.0'      # a truncated line in rank 1's shard
        else:
            yield json.dumps({"x": [((i * 7 + k) % 11) / 11 for k in range(4)], "y": (i % 5) / 5})


class Prefetcher:
    def __init__(self, rank, depth=8):
        self.q = queue.Queue(maxsize=depth)
        self.thread = threading.Thread(target=self.run, args=(rank,), name="prefetch", daemon=True)
        self.thread.start()

    def run(self, rank):
        for line in records(rank):
            rec = json.loads(line)
            self.q.put((torch.tensor(rec["x"]), torch.tensor([rec["y"]])))
        self.q.put(None)

    def __iter__(self):
        batch = []
        while (item := self.q.get()) is not None:
            batch.append(item)
            if len(batch) == 8:
                xs, ys = zip(*batch)
                yield torch.stack(xs), torch.stack(ys)
                batch = []


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, (xb, yb) in enumerate(Prefetcher(rank)):
        loss = nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    print(f"rank {rank} finished the epoch", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
