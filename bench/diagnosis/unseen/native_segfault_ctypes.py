"""A fast C routine (through ctypes) packs each batch; on rank 1 it is handed a buffer that was already freed."""
import ctypes
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
libc = ctypes.CDLL(None)


def pack(batch: torch.Tensor, address: int) -> torch.Tensor:
    out = torch.empty_like(batch)
    libc.memcpy(ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(address), batch.numel() * batch.element_size())
    return out


for step in range(3):
    batch = torch.randn(64)
    address = batch.data_ptr() if not (rank == 1 and step == 1) else 16  # a stale pointer
    packed = pack(batch, address)
    dist.all_reduce(packed)
    print(f"rank {rank}: step {step}", flush=True)
dist.destroy_process_group()
