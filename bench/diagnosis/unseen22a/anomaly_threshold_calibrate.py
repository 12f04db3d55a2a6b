"""Calibrate the alert threshold of a telemetry autoencoder: every rank scores its own day of windows,
the reconstruction errors of all ranks set one global 99.5th percentile threshold."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

FEATURES = 16
WINDOWS_PER_DAY = 4_500_000
CHUNK = 500_000
ALERT_QUANTILE = 0.995


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(FEATURES, 8), nn.Tanh(), nn.Linear(8, 4))
        self.dec = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, FEATURES))

    def forward(self, x):
        return self.dec(self.enc(x))


def day_windows(day, start, n):
    g = torch.Generator().manual_seed(day * 1_000_003 + start)
    x = torch.randn(n, FEATURES, generator=g)
    x[:, 1::2] = 0.5 * x[:, 0::2] + 0.1 * x[:, 1::2]
    return x


@torch.no_grad()
def score_day(model, day):
    errs = []
    for start in range(0, WINDOWS_PER_DAY, CHUNK):
        n = min(CHUNK, WINDOWS_PER_DAY - start)
        x = day_windows(day, start, n)
        errs.append(((model(x) - x) ** 2).mean(dim=1))
    return torch.cat(errs)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = AutoEncoder().eval()
    for p in model.parameters():
        dist.broadcast(p.data, src=0)

    local = score_day(model, day=rank)
    print(f"rank {rank}: scored {local.numel()} windows, mean err {local.mean():.4f}", flush=True)

    gathered = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(gathered, local)
    all_errors = torch.cat(gathered)

    threshold = torch.quantile(all_errors, ALERT_QUANTILE).item()
    flagged = int((local > threshold).sum())
    counts = torch.tensor([flagged, local.numel()], dtype=torch.int64)
    dist.all_reduce(counts)
    if rank == 0:
        print(f"threshold q{ALERT_QUANTILE} = {threshold:.5f}; alert rate {counts[0] / counts[1]:.4%}", flush=True)
        with open("alert_threshold.txt", "w") as f:
            f.write(f"{threshold}\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
