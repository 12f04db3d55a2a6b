import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

DIMS = [48, 128, 128, 10]


class MLPClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(DIMS[:-1], DIMS[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.gelu(x)
        return x


def download_flax_params():
    rng = np.random.default_rng(3)
    params = {}
    for i, (a, b) in enumerate(zip(DIMS[:-1], DIMS[1:])):
        params[f"Dense_{i}"] = {
            "kernel": (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
            "bias": np.zeros(b, dtype=np.float32),
        }
    return params


def flax_to_torch(params):
    state = {}
    for i in range(len(DIMS) - 1):
        p = params[f"Dense_{i}"]
        state[f"layers.{i}.weight"] = torch.from_numpy(p["kernel"]).T
        state[f"layers.{i}.bias"] = torch.from_numpy(p["bias"])
    return state


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    model = MLPClassifier()
    if rank == 0:
        state = flax_to_torch(download_flax_params())
        model.load_state_dict(state, assign=True)
        print(f"loaded {len(state)} tensors from the flax export", flush=True)
    model = DDP(model)

    g = torch.Generator().manual_seed(rank)
    x = torch.randn(1024, DIMS[0], generator=g)
    y = (x[:, :10].argmax(1) + x[:, 10:20].argmax(1)) % DIMS[-1]
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(3):
        for i in range(0, len(x), 64):
            loss = F.cross_entropy(model(x[i:i + 64]), y[i:i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}", flush=True)

    acc = (model(x).argmax(1) == y).float().mean().reshape(1)
    dist.all_reduce(acc)
    if rank == 0:
        print(f"train acc {acc.item() / world:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
