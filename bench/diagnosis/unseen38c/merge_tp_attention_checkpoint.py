import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

D_MODEL = 32
N_HEADS = 4


def attend(qkv, n_heads, out_proj):
    b, s, _ = qkv.shape
    q, k, v = qkv.chunk(3, dim=-1)
    hd = q.shape[-1] // n_heads

    def split(t):
        return t.view(b, s, n_heads, hd).transpose(1, 2)

    q, k, v = split(q), split(k), split(v)
    att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)
    y = (att @ v).transpose(1, 2).reshape(b, s, n_heads * hd)
    return out_proj(y)


class TPAttention(nn.Module):
    def __init__(self, full_qkv, full_out, rank, world):
        super().__init__()
        self.local_heads = N_HEADS // world
        width = D_MODEL // world
        rows = slice(rank * width, (rank + 1) * width)
        wq, wk, wv = full_qkv.chunk(3, dim=0)
        self.qkv = nn.Linear(D_MODEL, 3 * width, bias=False)
        self.out = nn.Linear(width, D_MODEL, bias=False)
        with torch.no_grad():
            self.qkv.weight.copy_(torch.cat([wq[rows], wk[rows], wv[rows]], dim=0))
            self.out.weight.copy_(full_out[:, rows])

    def forward(self, x):
        y = attend(self.qkv(x), self.local_heads, self.out)
        dist.all_reduce(y)
        return y


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL, bias=False)
        self.out = nn.Linear(D_MODEL, D_MODEL, bias=False)

    def forward(self, x):
        return attend(self.qkv(x), N_HEADS, self.out)


def all_gather_cat(t, dim, world):
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=dim)


def main():
    timeout = int(os.environ.get("PG_TIMEOUT", "60"))
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    assert N_HEADS % world == 0, "heads must divide the tensor-parallel size"

    g = torch.Generator().manual_seed(0)
    init_qkv = torch.randn(3 * D_MODEL, D_MODEL, generator=g) * 0.2
    init_out = torch.randn(D_MODEL, D_MODEL, generator=g) * 0.2
    tp = TPAttention(init_qkv, init_out, rank, world)

    opt = torch.optim.SGD(tp.parameters(), lr=0.1)
    data_gen = torch.Generator().manual_seed(11)
    for step in range(10):
        x = torch.randn(2, 6, D_MODEL, generator=data_gen)
        loss = (tp(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    with torch.no_grad():
        merged = {
            "qkv.weight": all_gather_cat(tp.qkv.weight.data, 0, world),
            "out.weight": all_gather_cat(tp.out.weight.data, 1, world),
        }
        probe = torch.randn(2, 6, D_MODEL, generator=torch.Generator().manual_seed(5))
        expected = tp(probe)

    single = Attention()
    single.load_state_dict(merged)
    with torch.no_grad():
        got = single(probe)
    err = (got - expected).abs().max().item()
    print(f"rank {rank}: merged checkpoint max err vs tp={world}: {err:.3e}", flush=True)
    if err > 1e-4:
        raise RuntimeError(f"merged attention checkpoint does not reproduce the TP model (max err {err:.3e})")
    if rank == 0:
        torch.save(single.state_dict(), "attention_merged.pt")
        print("wrote attention_merged.pt", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
