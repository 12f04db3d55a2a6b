"""Raw-waveform keyword spotter with a learnable filterbank front end and global channel-energy normalisation."""
import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

SR, N_FILT, N_CLASSES, BATCH, STEPS = 8000, 24, 6, 8, 6


def synthetic_clips(n, seed):
    g = torch.Generator().manual_seed(seed)
    clips = []
    for _ in range(n):
        label = int(torch.randint(0, N_CLASSES, (1,), generator=g))
        samples = int(torch.randint(SR // 2, SR, (1,), generator=g))
        t = torch.arange(samples) / SR
        wav = torch.sin(2 * math.pi * (300 + 250 * label) * t) + 0.3 * torch.randn(samples, generator=g)
        clips.append((wav, label))
    return clips


def global_channel_rms(energy, mask):
    per_channel = (energy * mask).sum(dim=(0, 2)) / mask.sum()
    rms = per_channel.sqrt()
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(rms)
        rms.div_(dist.get_world_size())
    return rms


class Spotter(nn.Module):
    def __init__(self):
        super().__init__()
        self.filters = nn.Conv1d(1, N_FILT, 101, stride=80, padding=50, bias=False)
        self.body = nn.Sequential(nn.Conv1d(N_FILT, 48, 5, padding=2), nn.ReLU(), nn.Conv1d(48, 48, 5, padding=2), nn.ReLU())
        self.head = nn.Linear(48, N_CLASSES)

    def forward(self, wav, lengths):
        energy = self.filters(wav.unsqueeze(1)).pow(2)
        frames = (lengths + 100 - 101) // 80 + 1
        mask = (torch.arange(energy.shape[-1])[None, :] < frames[:, None]).float().unsqueeze(1)
        rms = global_channel_rms(energy, mask)
        feats = torch.log1p(energy / (rms[None, :, None] + 1e-5)) * mask
        h = self.body(feats) * mask
        pooled = h.sum(-1) / mask.sum(-1)
        return self.head(pooled)


def collate(clips):
    lengths = torch.tensor([w.numel() for w, _ in clips])
    wav = torch.zeros(len(clips), int(lengths.max()))
    for i, (w, _) in enumerate(clips):
        wav[i, : w.numel()] = w
    return wav, lengths, torch.tensor([y for _, y in clips])


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    clips = synthetic_clips(BATCH * STEPS, seed=100 + rank)
    model = DDP(Spotter())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    for step in range(STEPS):
        wav, lengths, labels = collate(clips[step * BATCH:(step + 1) * BATCH])
        logits = model(wav, lengths)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = (logits.argmax(-1) == labels).float().mean().detach()
        dist.all_reduce(acc)
        if rank == 0:
            print(f"step {step} loss={loss.item():.3f} acc={acc.item() / world:.2f}", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), "spotter.pt")
        print("saved spotter.pt", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
