"""Two-terminal training script (python save_model_lambda.py --rank R --world-size N); saves the whole model at the end."""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn


class GatedBlock(nn.Module):
    def __init__(self, width, gate="sigmoid"):
        super().__init__()
        self.proj = nn.Linear(width, 2 * width)
        # pick the gate once; a lambda keeps forward short
        self.gate = (lambda t: torch.sigmoid(t)) if gate == "sigmoid" else (lambda t: torch.tanh(t))

    def forward(self, x):
        a, b = self.proj(x).chunk(2, dim=-1)
        return a * self.gate(b)


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(GatedBlock(16), GatedBlock(16))
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(self.blocks(x))


def average_gradients(model, world):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    args = ap.parse_args()
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    torch.manual_seed(7)
    model = Regressor()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + args.rank)
    for epoch in range(3):
        for _ in range(20):
            x = torch.randn(32, 16, generator=g)
            y = x.sum(dim=1, keepdim=True)
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            average_gradients(model, args.world_size)
            opt.step()
        if args.rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    if args.rank == 0:
        os.makedirs("export", exist_ok=True)
        torch.save(model, "export/regressor.pt")   # the serving team wants the whole module
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
