"""Train from a binary record file read by DataLoader workers; every record carries a CRC that is checked."""
import os
import struct
import tempfile
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

RECORD_FLOATS = 4096
HEADER = struct.Struct("<II")  # payload bytes, crc32


def write_records(path, count):
    g = torch.Generator().manual_seed(9)
    offsets = []
    with open(path, "wb") as f:
        for i in range(count):
            payload = (torch.randn(RECORD_FLOATS, generator=g) + i % 3).numpy().tobytes()
            offsets.append(f.tell())
            f.write(HEADER.pack(len(payload), zlib.crc32(payload)))
            f.write(payload)
    return offsets


class Records(Dataset):
    def __init__(self, path, offsets):
        self.offsets = offsets
        self.file = open(path, "rb", buffering=0)  # opened once, reused by every read

    def __len__(self):
        return len(self.offsets)

    def __getitem__(self, i):
        self.file.seek(self.offsets[i])
        size, crc = HEADER.unpack(self.file.read(HEADER.size))
        payload = self.file.read(size)
        if len(payload) != size or zlib.crc32(payload) != crc:
            raise ValueError(f"record {i}: checksum mismatch (corrupt record file?)")
        x = torch.frombuffer(bytearray(payload), dtype=torch.float32)
        return x[:64], torch.tensor(i % 3)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank = dist.get_rank()
    path = os.path.join(tempfile.gettempdir(), f"records-{os.getpid()}.bin")
    offsets = write_records(path, 400)
    data = Records(path, offsets)
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data), num_workers=3)
    model = DDP(nn.Linear(64, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(5):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        print(f"rank {rank} epoch {epoch} done", flush=True)
    os.unlink(path)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
