import os
from datetime import timedelta

import torch
import torch.distributed as dist

PATCH = 32
SIGMA = 2.0
LAMBDA = 1e-2
SEQ_PER_RANK = 3
FRAMES = 6


def gaussian_target(size, sigma):
    ys = torch.arange(size).float() - size // 2
    g = torch.exp(-(ys[:, None] ** 2 + ys[None, :] ** 2) / (2 * sigma ** 2))
    return torch.roll(g, shifts=(-(size // 2), -(size // 2)), dims=(0, 1))


def synthetic_sequence(seed):
    g = torch.Generator().manual_seed(seed)
    base = torch.rand(PATCH, PATCH, generator=g)
    base = torch.nn.functional.avg_pool2d(base[None, None], 3, 1, 1)[0, 0]
    frames, shifts = [], []
    for _ in range(FRAMES):
        dy, dx = torch.randint(-4, 5, (2,), generator=g).tolist()
        frames.append(torch.roll(base, shifts=(dy, dx), dims=(0, 1)) + 0.05 * torch.randn(PATCH, PATCH, generator=g))
        shifts.append((dy, dx))
    return base, frames, shifts


def preprocess(patch):
    win = torch.hann_window(PATCH, periodic=False)
    p = (patch - patch.mean()) / (patch.std() + 1e-5)
    return p * win[:, None] * win[None, :]


class MosseFilter:
    def __init__(self):
        self.G = torch.fft.rfft2(gaussian_target(PATCH, SIGMA))
        self.A = torch.zeros(PATCH, PATCH // 2 + 1, dtype=torch.complex64)
        self.B = torch.zeros(PATCH, PATCH // 2 + 1, dtype=torch.complex64)
        self.H = None

    def fit(self, patch):
        F = torch.fft.rfft2(preprocess(patch))
        self.A += self.G * F.conj()
        self.B += F * F.conj()

    def finalize(self):
        self.H = (self.A / (self.B + LAMBDA)).conj()

    def respond(self, patch):
        X = torch.fft.rfft2(preprocess(patch))
        return torch.fft.irfft2(self.H.conj() * X, s=(PATCH, PATCH))


def locate(resp):
    idx = int(resp.argmax())
    dy, dx = divmod(idx, PATCH)
    dy = dy - PATCH if dy > PATCH // 2 else dy
    dx = dx - PATCH if dx > PATCH // 2 else dx
    return dy, dx


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    filt = MosseFilter()
    for s in range(SEQ_PER_RANK):
        base, _, _ = synthetic_sequence(seed=100 * rank + s)
        for k in range(4):
            filt.fit(torch.roll(base, shifts=(k % 2, k // 2), dims=(0, 1)))
    filt.finalize()
    print(f"rank {rank}: local filter fitted on {SEQ_PER_RANK} sequences", flush=True)

    dist.all_reduce(filt.H)
    filt.H /= world

    hits, total = 0, 0
    for s in range(SEQ_PER_RANK):
        base, frames, shifts = synthetic_sequence(seed=100 * rank + s)
        for frame, true_shift in zip(frames, shifts):
            hits += int(locate(filt.respond(frame)) == true_shift)
            total += 1
    stats = torch.tensor([hits, total], dtype=torch.float64)
    dist.all_reduce(stats)
    if rank == 0:
        print(f"tracking precision {stats[0] / stats[1]:.3f} over {int(stats[1])} frames", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
