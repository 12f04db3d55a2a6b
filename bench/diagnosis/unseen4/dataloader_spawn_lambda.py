"""DataLoader workers started with 'spawn' (safer with threads), a padding collate written inline."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    data = TensorDataset(torch.randn(256, 10), torch.randint(0, 2, (256,)))
    pad_to = 12
    loader = DataLoader(
        data, batch_size=32, sampler=DistributedSampler(data), num_workers=2,
        multiprocessing_context="spawn",
        collate_fn=lambda batch: (torch.nn.functional.pad(torch.stack([b[0] for b in batch]), (0, pad_to - 10)),
                                  torch.stack([b[1] for b in batch])),
    )
    total = torch.zeros(1)
    for x, y in loader:
        total += x.sum()
    dist.all_reduce(total)
    print(f"rank {rank}: sum {total.item():.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
