"""Fine-tune a pretrained encoder with FSDP2 (fully_shard) across the nodes.

The pretrained weights are the consolidated state_dict the single-process prototype saved (pretrained.pt on the
shared disk). The model is sharded first, so no rank ever builds more than its share, then the weights are loaded.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


class Encoder(nn.Module):
    def __init__(self, dim=64, depth=3, classes=5):
        super().__init__()
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(dim, 4, 2 * dim, batch_first=True)
                                    for _ in range(depth))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean(1))


def prototype_checkpoint(path):
    """What the single-process prototype left behind: torch.save(model.state_dict())."""
    torch.manual_seed(1)
    torch.save(Encoder().state_dict(), path)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    path = os.path.join(os.getcwd(), "pretrained.pt")
    if rank == 0 and not os.path.exists(path):
        prototype_checkpoint(path)
    dist.barrier()

    mesh = init_device_mesh("cpu", (world,))
    model = Encoder()
    for layer in model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.load_state_dict(torch.load(path, map_location="cpu"))
    print(f"rank {rank}: pretrained weights loaded", flush=True)

    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    g = torch.Generator().manual_seed(rank)
    for step in range(30):
        x = torch.randn(16, 12, 64, generator=g)
        y = (x[:, :, :5].sum(1)).argmax(1)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
