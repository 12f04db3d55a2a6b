import os
import datetime
import math
import numpy as np
import torch
import torch.distributed as dist

SAMPLE_RATE = 16000


def synth_pcm_corpus(n_files=24, seed=5):
    rng = np.random.default_rng(seed)
    corpus = []
    for i in range(n_files):
        secs = rng.uniform(2.0, 6.0)
        t = np.arange(int(secs * SAMPLE_RATE)) / SAMPLE_RATE
        gain = rng.uniform(0.05, 0.9)
        wave = gain * np.sin(2 * math.pi * rng.uniform(100, 800) * t)
        wave += 0.01 * rng.standard_normal(t.shape)
        pcm = np.clip(wave * 32767, -32768, 32767).astype(np.int16)
        corpus.append((f"utt{i:04d}", pcm))
    return corpus


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    files = synth_pcm_corpus()[rank::world]
    local_peak = torch.zeros(1, dtype=torch.int16)
    energy = torch.zeros(1, dtype=torch.float64)
    samples = torch.zeros(1, dtype=torch.float64)
    for name, pcm in files:
        t = torch.from_numpy(pcm)
        local_peak = torch.maximum(local_peak, t.abs().max().reshape(1))
        energy += (t.double() ** 2).sum()
        samples += t.numel()

    peak = local_peak.clone()
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    dist.all_reduce(energy)
    dist.all_reduce(samples)
    rms = math.sqrt(energy.item() / samples.item())
    scale = 0.95 * 32767 / max(int(peak.item()), 1)
    print(f"rank {rank}: corpus peak {int(peak.item())} rms {rms:.1f} scale {scale:.3f}", flush=True)

    os.makedirs("normalized", exist_ok=True)
    for name, pcm in files:
        out = np.clip(pcm.astype(np.float32) * scale, -32768, 32767).astype(np.int16)
        np.save(os.path.join("normalized", f"{name}.npy"), out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
