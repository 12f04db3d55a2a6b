"""Train, checkpoint, then resume from the checkpoint (the resume path rebuilds the optimizer)."""
import io
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(16, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(torch.relu(self.backbone(x)))


def make_optimizer(model):
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                              {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)


def make_optimizer_for_resume(model):
    # same groups, written again in the resume helper
    groups = {"no_decay": [], "decay": []}
    for name, p in model.named_parameters():
        groups["no_decay" if name.endswith("bias") else "decay"].append(p)
    return torch.optim.AdamW([{"params": groups["no_decay"], "weight_decay": 0.0},
                              {"params": groups["decay"], "weight_decay": 0.01}], lr=1e-3)


def train(model, opt, steps, rank):
    for step in range(steps):
        x = torch.randn(32, 16)
        y = torch.randint(0, 4, (32,))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    print(f"rank {rank} trained {steps} steps, loss {loss.item():.4f}", flush=True)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DDP(Net())
    opt = make_optimizer(model.module)
    train(model, opt, 5, rank)
    buffer = io.BytesIO()
    torch.save({"model": model.module.state_dict(), "optim": opt.state_dict(), "step": 5}, buffer)
    print(f"rank {rank} checkpoint {buffer.tell()} bytes", flush=True)

    # resume as a restarted job would
    buffer.seek(0)
    ckpt = torch.load(buffer)
    resumed = DDP(Net())
    resumed.module.load_state_dict(ckpt["model"])
    opt2 = make_optimizer_for_resume(resumed.module)
    opt2.load_state_dict(ckpt["optim"])
    train(resumed, opt2, 5, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
