"""The data of exercise 11 in plain Python: the program feeds it to BatchNorm, the checker recomputes the statistics.

Rank r holds r + 2 samples (uneven on purpose) of CHANNELS features; sample i, channel c is (r + 1) ** 2 + i + c * c.
"""

CHANNELS = 3


def local_batch(rank: int) -> list[list[float]]:
    return [[float((rank + 1) ** 2 + i + c * c) for c in range(CHANNELS)] for i in range(rank + 2)]


def global_batch(world: int) -> list[list[float]]:
    """What one process would see if it held every rank's samples: the batch SyncBatchNorm normalises over."""
    return [sample for rank in range(world) for sample in local_batch(rank)]


def channel_stats(batch: list[list[float]]) -> tuple[list[float], list[float]]:
    """Per-channel mean and unbiased variance: what BatchNorm stores as running stats with momentum 1."""
    count = len(batch)
    means = [sum(sample[c] for sample in batch) / count for c in range(CHANNELS)]
    variances = [sum((sample[c] - means[c]) ** 2 for sample in batch) / (count - 1) for c in range(CHANNELS)]
    return means, variances
