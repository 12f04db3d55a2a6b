"""Denoise a 3D microscopy stack in z-slabs: each rank filters its slab plus a halo of neighbouring planes,
drops the halo again and the slabs are stitched back into the full stack for a quality report."""
import os
import datetime
import torch
import torch.distributed as dist
import torch.nn.functional as F

STACK = (64, 48, 48)
HALO = 3
ITERS = 3


def load_stack():
    g = torch.Generator().manual_seed(11)
    z, y, x = torch.meshgrid(*[torch.linspace(-1, 1, n) for n in STACK], indexing="ij")
    cells = sum(torch.exp(-((x - a) ** 2 + (y - b) ** 2 + (z - c) ** 2) / 0.02)
                for a, b, c in [(-0.4, 0.2, -0.5), (0.3, -0.3, 0.1), (0.1, 0.5, 0.6)])
    return cells, cells + 0.2 * torch.randn(STACK, generator=g)


def gaussian_kernel(sigma=1.0, size=5):
    r = torch.arange(size, dtype=torch.float32) - size // 2
    k1 = torch.exp(-r ** 2 / (2 * sigma ** 2))
    k = k1[:, None, None] * k1[None, :, None] * k1[None, None, :]
    return (k / k.sum())[None, None]


def denoise(block):
    k = gaussian_kernel()
    x = block[None, None]
    for _ in range(ITERS):
        x = F.conv3d(F.pad(x, (2, 2, 2, 2, 2, 2), mode="replicate"), k)
    return x[0, 0]


def slab_bounds(rank, world, depth):
    per = depth // world
    z0 = rank * per
    z1 = depth if rank == world - 1 else z0 + per
    lo = min(HALO, z0)
    hi = min(HALO, depth - z1)
    return z0, z1, lo, hi


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    clean, noisy = load_stack()

    if world == 1:
        result = denoise(noisy)
    else:
        z0, z1, lo, hi = slab_bounds(rank, world, STACK[0])
        block = denoise(noisy[z0 - lo:z1 + hi])
        core = block[lo:-hi]
        parts = [None] * world
        dist.all_gather_object(parts, core)
        result = torch.cat(parts, 0).reshape(STACK)

    mse_in = F.mse_loss(noisy, clean).item()
    mse_out = F.mse_loss(result, clean).item()
    if rank == 0:
        torch.save(result, "denoised_stack.pt")
        print(f"stitched {tuple(result.shape)} mse {mse_in:.4f} -> {mse_out:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
