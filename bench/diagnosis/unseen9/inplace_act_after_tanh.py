"""Residual MLP with a configurable activation; the config picks tanh for the gate and a ReLU (in place, to
save memory) after it."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CONFIG = {"dim": 48, "blocks": 3, "gate": "tanh", "post_act_inplace": True, "steps": 20}


class GatedBlock(nn.Module):
    def __init__(self, dim, gate, inplace):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.gate = {"tanh": torch.tanh, "sigmoid": torch.sigmoid}[gate]
        self.post = nn.ReLU(inplace=inplace)

    def forward(self, x):
        h = self.gate(self.proj(x))
        return x + self.post(h)


class Net(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.inp = nn.Linear(16, cfg["dim"])
        self.blocks = nn.Sequential(*[GatedBlock(cfg["dim"], cfg["gate"], cfg["post_act_inplace"])
                                      for _ in range(cfg["blocks"])])
        self.out = nn.Linear(cfg["dim"], 1)

    def forward(self, x):
        return self.out(self.blocks(self.inp(x)))


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(Net(CONFIG))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(CONFIG["steps"]):
        x = torch.randn(32, 16)
        loss = nn.functional.mse_loss(model(x), x[:, :3].prod(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
