"""Fit the regional price-elasticity regression in closed form on every rank's partition
of the sales table, then average the coefficients into one model."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

N_REGIONS = 5
N_NUMERIC = 6


def init():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def load_partition(rank, world_size, rows_per_rank=3000):
    g = torch.Generator().manual_seed(11)
    n = rows_per_rank * world_size
    region = torch.sort(torch.randint(0, N_REGIONS, (n,), generator=g)).values
    numeric = torch.randn(n, N_NUMERIC, generator=g, dtype=torch.float64)
    true_w = torch.linspace(-1, 1, N_NUMERIC, dtype=torch.float64)
    offsets = torch.arange(N_REGIONS, dtype=torch.float64) * 0.3
    y = numeric @ true_w + offsets[region] + 0.05 * torch.randn(n, generator=g, dtype=torch.float64)
    lo, hi = rank * rows_per_rank, (rank + 1) * rows_per_rank
    return region[lo:hi], numeric[lo:hi], y[lo:hi]


def design_matrix(region, numeric):
    onehot = torch.nn.functional.one_hot(region, N_REGIONS).to(torch.float64)
    mean = numeric.mean(0, keepdim=True)
    std = numeric.std(0, keepdim=True)
    return torch.cat([onehot, (numeric - mean) / std], dim=1)


def solve_normal_equations(x, y):
    gram = x.T @ x
    rhs = x.T @ y
    chol = torch.linalg.cholesky(gram)
    return torch.cholesky_solve(rhs.unsqueeze(1), chol).squeeze(1)


def main():
    rank, world_size = init()
    region, numeric, y = load_partition(rank, world_size)
    x = design_matrix(region, numeric)
    print(f"rank {rank}: {x.shape[0]} rows, regions {sorted(set(region.tolist()))}", flush=True)
    coef = solve_normal_equations(x, y)
    dist.all_reduce(coef)
    coef /= world_size
    resid = y - x @ coef
    sse = torch.tensor([resid.pow(2).sum().item(), float(y.numel())], dtype=torch.float64)
    dist.all_reduce(sse)
    if rank == 0:
        print("region offsets:", [round(v, 3) for v in coef[:N_REGIONS].tolist()], flush=True)
        print(f"rmse {(sse[0] / sse[1]).sqrt().item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
