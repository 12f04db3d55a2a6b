import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist

N = 64
L = 2 * math.pi


def setup():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def local_rhs(rank, world):
    rows = N // world
    y = torch.arange(rank * rows, (rank + 1) * rows, dtype=torch.float64) * L / N
    x = torch.arange(N, dtype=torch.float64) * L / N
    Y, X = torch.meshgrid(y, x, indexing="ij")
    return -2.0 * torch.sin(X) * torch.cos(Y), torch.sin(X) * torch.cos(Y)


def transpose_spectrum(spec, world):
    rows, cols = spec.shape
    send = spec.reshape(rows, world, cols // world).permute(1, 0, 2).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(torch.view_as_real(recv), torch.view_as_real(send))
    return recv.reshape(world * rows, cols // world).t().contiguous()


def untranspose_spectrum(spec_t, world, rows):
    kx_local, ny = spec_t.shape
    send = spec_t.t().reshape(world, rows, kx_local).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(torch.view_as_real(recv), torch.view_as_real(send))
    return recv.permute(1, 0, 2).reshape(rows, world * kx_local)


def solve(rhs, rank, world):
    rows = rhs.shape[0]
    spec = torch.fft.rfft(rhs, dim=1)
    spec_t = transpose_spectrum(spec, world)
    spec_t = torch.fft.fft(spec_t, dim=1)
    kx_all = torch.fft.rfftfreq(N, d=L / N / (2 * math.pi))
    kx_local = kx_all.shape[0] // world
    kx = kx_all[rank * kx_local:(rank + 1) * kx_local]
    ky = torch.fft.fftfreq(N, d=L / N / (2 * math.pi))
    k2 = kx[:, None] ** 2 + ky[None, :] ** 2
    k2[k2 == 0] = 1.0
    phi_t = -spec_t / k2
    if rank == 0:
        phi_t[0, 0] = 0.0
    phi_t = torch.fft.ifft(phi_t, dim=1)
    phi = untranspose_spectrum(phi_t, world, rows)
    return torch.fft.irfft(phi, n=N, dim=1)


def main():
    rank, world = setup()
    rhs, exact = local_rhs(rank, world)
    phi = solve(rhs, rank, world)
    err = torch.tensor([(phi - exact).abs().max().item()], dtype=torch.float64)
    dist.all_reduce(err, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"poisson solve on {N}x{N} grid, {world} slabs: max error {err.item():.3e}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
