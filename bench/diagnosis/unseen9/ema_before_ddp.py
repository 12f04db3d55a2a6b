"""Image classifier trainer with an exponential moving average (EMA) of the weights, timm style."""
import copy
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class ModelEma:
    """Keeps a moving average of a model's weights for evaluation."""

    def __init__(self, model, decay=0.999):
        self.ema = copy.deepcopy(model)
        self.ema.eval()
        self.decay = decay
        for p in self.ema.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for e, m in zip(self.ema.state_dict().values(), model.state_dict().values()):
            if e.dtype.is_floating_point:
                e.mul_(self.decay).add_(m, alpha=1 - self.decay)


def make_model():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    net = make_model()
    ema = ModelEma(net, decay=0.995)
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(20):
        x, y = torch.randn(16, 3, 12, 12), torch.randint(0, 10, (16,))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update(model.module)
    # the EMA weights are what we export: every replica must hold the same ones
    checksum = torch.tensor([sum(p.double().sum().item() for p in ema.ema.parameters())])
    seen = [torch.zeros(1, dtype=torch.float64) for _ in range(dist.get_world_size())]
    dist.all_gather(seen, checksum.double())
    values = [round(t.item(), 4) for t in seen]
    if len(set(values)) != 1:
        raise SystemExit(f"EMA weights differ across ranks: checksums {values}")
    print("final loss", round(loss.item(), 3), "ema checksum", values[0], flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
