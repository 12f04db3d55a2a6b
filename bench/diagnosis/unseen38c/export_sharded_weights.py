import hashlib
import json
import os
import struct
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

EXPORT_DIR = os.environ.get("EXPORT_DIR", "export")
PREFIX = "model"
DTYPES = {torch.float32: "F32", torch.int64: "I64"}


class ColumnShardMLP(nn.Module):
    def __init__(self, d_model, d_ff, world_size):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff // world_size)
        self.down = nn.Linear(d_ff // world_size, d_model, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def write_shard(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        data = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        digest = hashlib.sha256(f.read()).hexdigest()
    return header, digest


def shard_name(rank, world_size):
    return f"{PREFIX}-{rank + 1:05d}-of-{world_size:05d}.safetensors"


def prune_stale(directory, keep):
    for fname in sorted(os.listdir(directory)):
        if fname.startswith(PREFIX + "-") and fname.endswith(".safetensors") and fname not in keep:
            os.remove(os.path.join(directory, fname))
            print(f"removed stale shard {fname}", flush=True)


def main():
    timeout = int(os.environ.get("PG_TIMEOUT", "60"))
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    torch.manual_seed(1234 + rank)

    model = ColumnShardMLP(64, 256, world)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(20):
        x = torch.randn(16, 64)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.barrier()

    os.makedirs(EXPORT_DIR, exist_ok=True)
    mine = shard_name(rank, world)
    tensors = {f"layers.0.mlp.{k}": v for k, v in model.state_dict().items()}
    write_shard(os.path.join(EXPORT_DIR, mine), tensors)
    print(f"rank {rank}: wrote {mine} ({len(tensors)} tensors)", flush=True)
    dist.barrier()

    prune_stale(EXPORT_DIR, keep={mine})
    dist.barrier()

    if local_rank == 0:
        first = rank - local_rank
        weight_map, digests = {}, {}
        for r in range(first, first + local_world):
            fname = shard_name(r, world)
            header, digest = read_header(os.path.join(EXPORT_DIR, fname))
            digests[fname] = digest
            for name in header:
                weight_map[f"rank{r}/{name}"] = fname
        index = {"metadata": {"world_size": world, "node_ranks": list(range(first, first + local_world))},
                 "weight_map": weight_map, "sha256": digests}
        with open(os.path.join(EXPORT_DIR, f"{PREFIX}.index.json"), "w") as f:
            json.dump(index, f, indent=1)
        print(f"rank {rank}: indexed {len(weight_map)} tensors in {len(digests)} shards", flush=True)
    dist.barrier()
    total = torch.tensor([float(np.float32(loss.item()))])
    dist.all_reduce(total)
    if rank == 0:
        print(f"export done, mean final loss {total.item() / world:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
