"""A small Trainer with checkpoint/resume: the job is preempted after 2 epochs (simulated by running fit twice)
and resumed from checkpoints/last.pt on the shared folder."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

CKPT = "checkpoints/last.pt"


class Trainer:
    def __init__(self, max_epochs):
        self.rank = dist.get_rank()
        self.max_epochs = max_epochs
        torch.manual_seed(0)
        self.model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(3)
        x = torch.randn(512, 10, generator=g)
        self.data = TensorDataset(x, x.sum(dim=1, keepdim=True))
        self.sampler = DistributedSampler(self.data, seed=0)
        self.loader = DataLoader(self.data, batch_size=32, sampler=self.sampler)
        self.start_epoch = 0

    def is_main(self):
        return self.rank == 0

    def restore(self):
        if self.is_main() and os.path.exists(CKPT):
            state = torch.load(CKPT)
            self.model.module.load_state_dict(state["model"])
            self.opt.load_state_dict(state["optim"])
            self.start_epoch = state["epoch"] + 1
            print(f"resumed from {CKPT} at epoch {self.start_epoch}", flush=True)

    def save(self, epoch):
        if self.is_main():
            os.makedirs("checkpoints", exist_ok=True)
            torch.save({"model": self.model.module.state_dict(), "optim": self.opt.state_dict(), "epoch": epoch}, CKPT)
        dist.barrier()

    def fit(self, stop_after=None):
        self.restore()
        for epoch in range(self.start_epoch, self.max_epochs):
            self.sampler.set_epoch(epoch)
            for xb, yb in self.loader:
                loss = nn.functional.mse_loss(self.model(xb), yb)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            print(f"rank {self.rank} epoch {epoch} loss {loss.item():.4f}", flush=True)
            self.save(epoch)
            if stop_after is not None and epoch + 1 >= stop_after:
                print(f"rank {self.rank}: preempted after epoch {epoch}", flush=True)
                return


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    Trainer(max_epochs=5).fit(stop_after=2)      # first allocation
    Trainer(max_epochs=5).fit()                  # the resumed job
    dist.barrier()
    if dist.get_rank() == 0:
        print("training complete", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
