"""Exercise 11: SyncBatchNorm normalises over the global batch; plain BatchNorm only over each rank's share.

Every rank holds a different number of samples. After one training-mode forward pass with
momentum 1, BatchNorm's running stats are exactly the statistics it normalised with: plain
BatchNorm1d stores its own rank's, the synchronised one stores those of all ranks' samples
together (a count-weighted mean, not the mean of the per-rank means).

torch.nn.SyncBatchNorm runs only on GPUs. On CPU the exercise uses AllReduceBatchNorm, a
forward-only stand-in that all-reduces the same per-channel (count, sum, sum of squares);
on GPU both run and must agree.
"""

import copy

import torch
import torch.distributed as dist

import labkit
from batches import CHANNELS, local_batch


class AllReduceBatchNorm(torch.nn.BatchNorm1d):
    """BatchNorm1d whose training-mode statistics come from every rank's samples (forward only)."""

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return super().forward(batch)
        totals = torch.cat([torch.tensor([batch.shape[0]], dtype=torch.float64, device=batch.device),
                            batch.double().sum(dim=0), (batch.double() ** 2).sum(dim=0)])
        dist.all_reduce(totals)
        count, total, squares = totals[0], totals[1:1 + CHANNELS], totals[1 + CHANNELS:]
        mean = total / count
        variance = squares / count - mean**2  # biased: what normalisation uses
        with torch.no_grad():
            self.running_mean.lerp_(mean.to(batch.dtype), self.momentum)
            self.running_var.lerp_((variance * count / (count - 1)).to(batch.dtype), self.momentum)
            self.num_batches_tracked += 1
        normalised = (batch - mean.to(batch.dtype)) / torch.sqrt(variance.to(batch.dtype) + self.eps)
        return normalised * self.weight + self.bias


def running_stats(norm: torch.nn.Module, batch: torch.Tensor) -> dict:
    """One training-mode forward pass, then the running statistics it left behind."""
    norm.train()(batch)
    return {"running_mean": norm.running_mean.tolist(), "running_var": norm.running_var.tolist()}


def rounded(values: list[float]) -> list[float]:
    return [round(value, 3) for value in values]


def main() -> None:
    ids = labkit.torchrun_env()
    rank = ids["rank"]
    backend, device = labkit.init(local_rank=ids["local_rank"])
    batch = torch.tensor(local_batch(rank), device=device)
    plain = torch.nn.BatchNorm1d(CHANNELS, momentum=1.0).to(device)
    synced = {"AllReduceBatchNorm": running_stats(AllReduceBatchNorm(CHANNELS, momentum=1.0).to(device), batch)}
    if device.type == "cuda":
        # The usual way in: convert every BatchNorm of an existing model.
        converted = torch.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(plain))
        synced["torch.nn.SyncBatchNorm"] = running_stats(converted, batch)
    plain_stats = running_stats(plain, batch)
    labkit.log(rank, f"{batch.shape[0]} samples; running mean: plain BatchNorm1d {rounded(plain_stats['running_mean'])}, "
                     + ", ".join(f"{name} {rounded(stats['running_mean'])}" for name, stats in synced.items()))
    labkit.write_result(rank, world_size=ids["world_size"], backend=backend, samples=batch.shape[0],
                        plain=plain_stats, synced=synced)
    labkit.finish()


if __name__ == "__main__":
    main()
