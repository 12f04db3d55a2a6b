import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class GatherLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        world = dist.get_world_size()
        parts = [torch.zeros_like(x) for _ in range(world)]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad_output):
        grad = grad_output.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad


class Encoder(nn.Module):
    def __init__(self, in_dim=32, hidden=64, proj=16):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(hidden, proj))

    def forward(self, x):
        return F.normalize(self.head(self.backbone(x)), dim=1)


def augment(x, gen):
    noise = torch.randn(x.shape, generator=gen) * 0.1
    mask = (torch.rand(x.shape, generator=gen) > 0.1).float()
    return (x + noise) * mask


def nt_xent(z1, z2, temperature, rank):
    z1_all = GatherLayer.apply(z1)
    z2_all = GatherLayer.apply(z2)
    n = z1.shape[0]
    logits = z1 @ z2_all.t() / temperature
    labels = torch.arange(n) + rank * n
    loss_a = F.cross_entropy(logits, labels)
    logits_b = z2 @ z1_all.t() / temperature
    loss_b = F.cross_entropy(logits_b, labels)
    return (loss_a + loss_b) / 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--temperature", type=float, default=0.2)
    args = p.parse_args()

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = Encoder()
    for p_ in model.parameters():
        dist.broadcast(p_.data, src=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    gen = torch.Generator().manual_seed(1000 + rank)
    data = torch.randn(args.batch * args.steps, 32, generator=gen)

    for step in range(args.steps):
        x = data[step * args.batch:(step + 1) * args.batch]
        z1 = model(augment(x, gen))
        z2 = model(augment(x, gen))
        loss = nt_xent(z1, z2, args.temperature, rank)
        opt.zero_grad()
        loss.backward()
        for p_ in model.parameters():
            dist.all_reduce(p_.grad)
            p_.grad /= world
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f} (global batch {args.batch * world})", flush=True)

    if rank == 0:
        torch.save(model.state_dict(), "simclr_encoder.pt")
        print("saved simclr_encoder.pt", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
