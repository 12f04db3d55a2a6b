"""Reconstruct a multi-coil MRI volume: coils are split over ranks, each rank runs the inverse FFT of its coils,
then the coil images are combined and a normalised magnitude volume is written by rank 0."""
import os
import datetime
import numpy as np
import torch
import torch.distributed as dist

N_COILS = 8
SHAPE = (16, 48, 48)


def coil_kspace(c):
    g = torch.Generator().manual_seed(7)
    z, y, x = torch.meshgrid(*[torch.linspace(-1, 1, n) for n in SHAPE], indexing="ij")
    phantom = ((x ** 2 + y ** 2 + z ** 2) < 0.6).float() + 0.3 * ((x - 0.2) ** 2 + y ** 2 < 0.05).float()
    angle = 2 * np.pi * c / N_COILS
    sens = torch.exp(-((x - 0.8 * np.cos(angle)) ** 2 + (y - 0.8 * np.sin(angle)) ** 2))
    phase = torch.exp(1j * (0.5 * c + 0.3 * x))
    img = phantom * sens * phase
    noise = 0.01 * torch.complex(torch.randn(SHAPE, generator=g), torch.randn(SHAPE, generator=g))
    return torch.fft.fftn(img, dim=(-3, -2, -1)) + noise


def recon_coils(coils):
    imgs = []
    for c in coils:
        k = coil_kspace(c)
        imgs.append(torch.fft.ifftn(k, dim=(-3, -2, -1)).to(torch.complex64))
    return torch.stack(imgs)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    coils = list(range(rank, N_COILS, world))
    imgs = recon_coils(coils)

    sos = (imgs.abs() ** 2).sum(0)
    combined = (imgs * imgs.abs()).sum(0)
    peak = imgs.reshape(len(coils), -1).abs().argmax(1)
    ref = imgs.reshape(len(coils), -1)[torch.arange(len(coils)), peak]
    ref = ref[ref.abs().argmax()].reshape(1).clone()
    if world > 1:
        dist.all_reduce(sos)
        dist.all_reduce(combined)
        dist.all_reduce(ref, op=dist.ReduceOp.MAX)
    phase_ref = ref / ref.abs()
    volume = (combined * phase_ref.conj()).abs() / sos.sqrt().clamp_min(1e-6)
    volume = volume / volume.max()
    if rank == 0:
        np.save("recon_volume.npy", volume.numpy())
        print(f"recon done: shape {tuple(volume.shape)} mean {volume.mean().item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
