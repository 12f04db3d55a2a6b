"""Train a classifier, export its weights, then reload them into the serving class (refactored: the layers were
renamed) and evaluate the reloaded model on every rank. The script checks the reloaded accuracy."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class TrainNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 64), nn.ReLU())
        self.classifier = nn.Linear(64, 3)

    def forward(self, x):
        return self.classifier(self.encoder(x))


class ServeNet(nn.Module):
    """The serving code's copy of the model after the refactor."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(20, 64), nn.ReLU())
        self.head = nn.Linear(64, 3)

    def forward(self, x):
        return self.head(self.backbone(x))


def data(seed, n):
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=gen)
    x = torch.randn(n, 20, generator=gen)
    x[torch.arange(n), y] += 3.0
    return x, y


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def load_weights(model, state):
    result = model.load_state_dict(state, strict=False)   # tolerate extra buffers from older exports
    return model, result


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = TrainNet()
    model = DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, y = data(rank, 1024)
    for epoch in range(5):
        for i in range(0, 1024, 64):
            loss = nn.functional.cross_entropy(model(x[i:i + 64]), y[i:i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
    xv, yv = data(500, 1000)
    trained_acc = accuracy(net, xv, yv)
    exported = {k: v.clone() for k, v in net.state_dict().items()}
    torch.manual_seed(1 + rank)
    served, _ = load_weights(ServeNet(), exported)
    served_acc = accuracy(served.eval(), xv, yv)
    if rank == 0:
        print(f"trained accuracy {trained_acc:.3f}, reloaded accuracy {served_acc:.3f}", flush=True)
    dist.destroy_process_group()
    if abs(served_acc - trained_acc) > 0.02:
        raise SystemExit(f"export check failed on rank {rank}: reloaded model scores {served_acc:.3f}, "
                         f"the trained one {trained_acc:.3f}")


if __name__ == "__main__":
    main()
