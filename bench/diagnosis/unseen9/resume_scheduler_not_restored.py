"""Trainer with checkpoint/resume: trains 6 epochs with a step LR schedule; a preemption after epoch 3 is
simulated and the job resumes from the last checkpoint. The final learning rate must match the schedule."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

EPOCHS, BASE_LR, STEP, GAMMA = 6, 0.1, 2, 0.5
CKPT = "checkpoints/last.pt"


class Trainer:
    def __init__(self, rank):
        self.rank = rank
        torch.manual_seed(0)
        self.model = DDP(nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=BASE_LR, momentum=0.9)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=STEP, gamma=GAMMA)
        self.epoch = 0

    def save(self):
        if self.rank == 0:
            os.makedirs(os.path.dirname(CKPT), exist_ok=True)
            torch.save({"model": self.model.module.state_dict(), "optimizer": self.opt.state_dict(),
                        "epoch": self.epoch}, CKPT)
        dist.barrier()

    def restore(self):
        state = torch.load(CKPT, map_location="cpu")
        self.model.module.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.epoch = state["epoch"]

    def fit(self, until):
        g = torch.Generator().manual_seed(self.rank)
        while self.epoch < until:
            for _ in range(10):
                x = torch.randn(16, 8, generator=g)
                loss = nn.functional.mse_loss(self.model(x), x.sum(1, keepdim=True))
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            self.sched.step()
            self.epoch += 1
            self.save()
            if self.rank == 0:
                print(f"epoch {self.epoch} loss {loss.item():.4f} lr {self.sched.get_last_lr()[0]:.4f}", flush=True)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    first = Trainer(rank)
    first.fit(until=3)
    del first                       # preempted here
    resumed = Trainer(rank)
    resumed.restore()
    resumed.fit(until=EPOCHS)
    lr = resumed.opt.param_groups[0]["lr"]
    expected = BASE_LR * GAMMA ** (EPOCHS // STEP)
    if abs(lr - expected) > 1e-9:
        raise SystemExit(f"rank {rank}: final learning rate {lr:.4f}, the schedule says {expected:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
