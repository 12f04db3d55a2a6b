import os
import datetime
import math
import torch
import torch.distributed as dist

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
N_MELS = 80


def synth_recording(seconds=600.0, seed=3):
    g = torch.Generator().manual_seed(seed)
    n = int(seconds * SAMPLE_RATE) + 600
    t = torch.arange(n, dtype=torch.float32) / SAMPLE_RATE
    tone = 0.3 * torch.sin(2 * math.pi * 220 * t) * torch.sin(2 * math.pi * 0.5 * t)
    return tone + 0.02 * torch.randn(n, generator=g)


def mel_filterbank(n_freqs, n_mels, sr):
    def hz_to_mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)
    mels = torch.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    freqs = torch.linspace(0, sr / 2, n_freqs)
    fb = torch.zeros(n_freqs, n_mels)
    for m in range(n_mels):
        lo, mid, hi = hz[m], hz[m + 1], hz[m + 2]
        up = (freqs - lo) / (mid - lo)
        down = (hi - freqs) / (hi - mid)
        fb[:, m] = torch.clamp(torch.minimum(up, down), min=0.0)
    return fb


def segment_for_rank(audio, rank, world):
    seg = audio.numel() // world
    start = rank * seg
    end = audio.numel() if rank == world - 1 else start + seg
    return audio[start:end]


def fbank_stream(audio, fb, block_seconds=30):
    block = block_seconds * SAMPLE_RATE
    window = torch.hann_window(N_FFT)
    for start in range(0, audio.numel(), block):
        chunk = audio[start:start + block]
        spec = torch.stft(chunk, N_FFT, HOP, window=window, center=True,
                          pad_mode="reflect", return_complex=True)
        power = spec.abs() ** 2
        yield torch.log(power.T @ fb + 1e-6)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    audio = synth_recording()
    fb = mel_filterbank(N_FFT // 2 + 1, N_MELS, SAMPLE_RATE)
    mine = segment_for_rank(audio, rank, world)

    frames = torch.zeros(1, dtype=torch.float64)
    sums = torch.zeros(N_MELS, dtype=torch.float64)
    sq = torch.zeros(N_MELS, dtype=torch.float64)
    for feats in fbank_stream(mine, fb):
        frames += feats.shape[0]
        sums += feats.double().sum(0)
        sq += (feats.double() ** 2).sum(0)
    print(f"rank {rank}: {int(frames.item())} frames", flush=True)

    for t in (frames, sums, sq):
        dist.all_reduce(t)
    mean = sums / frames
    std = (sq / frames - mean ** 2).clamp_min(1e-8).sqrt()
    if rank == 0:
        torch.save({"mean": mean.float(), "std": std.float()}, "global_cmvn.pt")
        print(f"cmvn over {int(frames.item())} frames: mean[0]={mean[0]:.3f} std[0]={std[0]:.3f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
