"""DDP training with a small buffered metrics logger (rank 0 writes metrics.jsonl); torchrun, gloo, CPU."""
import datetime
import json
import os
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class MetricsLogger:
    """Buffers records and appends them to a JSON-lines file; safe to call from the loader thread too."""

    def __init__(self, path, enabled, flush_every=8):
        self.path = path
        self.enabled = enabled
        self.flush_every = flush_every
        self.buffer = []
        self.lock = threading.Lock()

    def log(self, **record):
        if not self.enabled:
            return
        with self.lock:
            record["time"] = time.time()
            self.buffer.append(record)
            if len(self.buffer) >= self.flush_every:
                self.flush()

    def flush(self):
        with self.lock:
            with open(self.path, "a") as f:
                for record in self.buffer:
                    f.write(json.dumps(record) + "\n")
            self.buffer.clear()


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    logger = MetricsLogger("metrics.jsonl", enabled=rank == 0)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    for step in range(30):
        x = torch.randn(64, 32, generator=g)
        y = (x[:, :4] > 0).long().argmax(1)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        logger.log(step=step, loss=loss.item())
        if rank == 0 and step % 5 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    logger.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
