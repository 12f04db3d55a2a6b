"""DDP training that uploads each checkpoint in the background (rank 0) so the loop does not wait for the
slow object store; torchrun, gloo, CPU."""
import datetime
import os
import queue
import shutil
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STORE = Path("object-store")


class CheckpointUploader:
    """Copies finished checkpoints to the object store from a background thread."""

    def __init__(self):
        self.pending = queue.Queue()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ckpt-uploader")
        self.thread.start()

    def submit(self, path):
        self.pending.put(path)

    def _run(self):
        while not self.stopped.is_set():
            try:
                path = self.pending.get(timeout=0.5)
            except queue.Empty:
                continue
            STORE.mkdir(exist_ok=True)
            time.sleep(0.2)                      # the store is slow
            shutil.copy(path, STORE / Path(path).name)
            print(f"uploaded {path}", flush=True)

    def close(self):
        self.stopped.set()
        self.thread.join()


def train(model, opt, rank, uploader, epochs=4):
    g = torch.Generator().manual_seed(rank)
    for epoch in range(epochs):
        for _ in range(10):
            x = torch.randn(32, 20, generator=g)
            y = x[:, :5].sum(1, keepdim=True)
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        if rank == 0:
            path = f"ckpt_epoch{epoch}.pt"
            torch.save(model.module.state_dict(), path)
            uploader.submit(path)
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    uploader = CheckpointUploader() if rank == 0 else None
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    try:
        train(model, opt, rank, uploader)
    except Exception:
        if uploader is not None:
            uploader.close()
        raise
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: training done", flush=True)


if __name__ == "__main__":
    main()
