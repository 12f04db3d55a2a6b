"""1-D U-Net denoiser for sensor traces, model-parallel over two ranks: encoder on stage 0, decoder on stage 1."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

CH, LENGTH, LEVELS = 16, 128, 3
BATCH, MICRO, STEPS = 8, 2, 5


class SkipStash:
    def __init__(self):
        self.items = []


class Down(nn.Module):
    def __init__(self, c_in, c_out, stash):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, 3, padding=1)
        self.stash = stash

    def forward(self, x):
        h = F.silu(self.conv(x))
        self.stash.items.append(h)
        return F.avg_pool1d(h, 2)


class Up(nn.Module):
    def __init__(self, c_in, c_skip, c_out, stash):
        super().__init__()
        self.conv = nn.Conv1d(c_in + c_skip, c_out, 3, padding=1)
        self.stash = stash

    def forward(self, x):
        skip = self.stash.items.pop()
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        return F.silu(self.conv(torch.cat([x, skip], dim=1)))


def build_unet():
    torch.manual_seed(3)
    stash = SkipStash()
    chans = [CH * 2 ** i for i in range(LEVELS + 1)]
    enc = [nn.Conv1d(1, CH, 3, padding=1)]
    enc += [Down(chans[i] if i else CH, chans[i + 1], stash) for i in range(LEVELS)]
    dec = [Up(chans[i + 1], chans[i + 1], chans[i], stash) for i in reversed(range(LEVELS))]
    dec += [nn.Conv1d(CH, 1, 1)]
    return nn.Sequential(*enc), nn.Sequential(*dec), stash


def noisy_batch(step):
    g = torch.Generator().manual_seed(step)
    t = torch.linspace(0, 6.28, LENGTH)
    freq = torch.rand(BATCH, 1, 1, generator=g) * 4 + 1
    clean = torch.sin(freq * t)
    return clean + 0.3 * torch.randn(clean.shape, generator=g), clean


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 2, "this job runs the encoder and decoder on two ranks"
    encoder, decoder, stash = build_unet()
    stage = encoder if rank == 0 else decoder
    opt = torch.optim.Adam(stage.parameters(), lr=2e-3)
    mb = BATCH // MICRO
    bottleneck = (mb, CH * 2 ** LEVELS, LENGTH // 2 ** LEVELS)

    for step in range(STEPS):
        noisy, clean = noisy_batch(step)
        if rank == 0:
            outs = []
            for i in range(MICRO):
                z = stage(noisy[i * mb:(i + 1) * mb])
                dist.send(z.detach(), dst=1)
                outs.append(z)
            for z in reversed(outs):
                g = torch.empty(bottleneck)
                dist.recv(g, src=1)
                z.backward(g)
        else:
            pending = []
            total = 0.0
            for i in range(MICRO):
                z = torch.empty(bottleneck)
                dist.recv(z, src=0)
                z.requires_grad_()
                pred = stage(z)
                loss = F.mse_loss(pred, clean[i * mb:(i + 1) * mb]) / MICRO
                total += loss.item()
                pending.append((z, loss))
            for z, loss in reversed(pending):
                loss.backward()
                dist.send(z.grad, dst=0)
            print(f"[rank 1] step {step} denoise mse {total:.4f}", flush=True)
        stash.items.clear()
        opt.step()
        opt.zero_grad()

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
