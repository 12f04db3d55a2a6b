"""Federated averaging with secure aggregation: clients agree pairwise seeds with a
Diffie-Hellman exchange, encode their weighted updates in fixed point and add
pairwise masks that cancel in the sum, so no single update is ever visible."""
import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

ROUNDS = 3
P = 2_147_483_647
G = 16_807
MOD = 2 ** 32
SCALE = 2 ** 16
CLIP = 1.0


def client_data(client, dim=10):
    g = torch.Generator().manual_seed(400 + client)
    n = 120 + 40 * client
    x = torch.randn(n, dim, generator=g)
    y = x @ torch.arange(1.0, dim + 1) / dim
    return x, y.unsqueeze(1)


def available(round_idx, client):
    return client == 0 or (round_idx + client) % 3 != 2


def agree_seeds(rank, world):
    secret = random.Random(rank * 7919 + 17).randrange(2, P - 1)
    pub = torch.tensor([pow(G, secret, P)], dtype=torch.int64)
    pubs = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(pubs, pub)
    return {j: pow(int(pubs[j].item()), secret, P) for j in range(world) if j != rank}


def pair_mask(seed, round_idx, numel):
    g = torch.Generator().manual_seed(seed * 1000 + round_idx)
    return torch.randint(0, MOD, (numel,), generator=g, dtype=torch.int64)


def encode(v):
    return torch.round(v.clamp(-CLIP, CLIP) * SCALE).to(torch.int64) % MOD


def decode(v):
    v = v % MOD
    return torch.where(v >= MOD // 2, v - MOD, v).double() / SCALE


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Linear(10, 1)
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    seeds = agree_seeds(rank, world)
    x, y = client_data(rank)

    for r in range(ROUNDS):
        start = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        masked = torch.zeros(start.numel() + 1, dtype=torch.int64)
        if available(r, rank):
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            for _ in range(8):
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            delta = torch.cat([p.detach().reshape(-1) for p in model.parameters()]) - start
            share = len(x) / 1000.0
            masked = encode(torch.cat([delta * share, torch.tensor([share])]))
            for j, s in seeds.items():
                m = pair_mask(s, r, masked.numel())
                masked = (masked + m) % MOD if rank < j else (masked - m) % MOD
        dist.all_reduce(masked)
        total = decode(masked)
        weight = total[-1].item()
        if not 0 < weight <= world * CLIP:
            raise ValueError(f"round {r}: secure aggregate failed range check (weight sum {weight:.3f})")
        update = (total[:-1] / weight).float()
        i = 0
        for p in model.parameters():
            p.data.copy_(start[i:i + p.numel()].view_as(p) + update[i:i + p.numel()].view_as(p))
            i += p.numel()
        print(f"[client {rank}] round {r} weight_sum={weight:.3f} |update|={update.norm():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
