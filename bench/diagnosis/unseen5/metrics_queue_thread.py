"""Training loop with a background metrics writer (a bounded queue drained by a thread)."""
import os
import queue
import threading
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class MetricsWriter:
    def __init__(self, path, maxsize=16):
        self.q = queue.Queue(maxsize=maxsize)
        self.path = path
        self.thread = threading.Thread(target=self._drain, name="metrics-writer", daemon=True)
        self.thread.start()

    def _drain(self):
        with open(self.path, "a") as out:
            while True:
                rec = self.q.get()
                out.write("step {step} loss {loss:.4f} grad_norm {grad_norm:.3f}\n".format(**rec))

    def log(self, **rec):
        self.q.put(rec)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    writer = MetricsWriter(f"metrics_rank{rank}.log") if rank == 0 else None
    g = torch.Generator().manual_seed(rank)
    for step in range(200):
        x = torch.randn(32, 16, generator=g)
        loss = nn.functional.mse_loss(model(x), x[:, :1])
        opt.zero_grad()
        loss.backward()
        grad_norm = None
        if step % 50 == 0:   # the norm is only computed now and then (it is slow on big models)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9).item()
        opt.step()
        if writer:
            writer.log(step=step, loss=loss.item(), grad_norm=grad_norm)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
