"""Export tokenized samples into webdataset-style tar shards, then verify them.

Each rank writes its share of the shards to its local output folder. Rank 0
then publishes the global shard manifest, and every rank re-opens the shards
the manifest assigns to it to check the sample counts before upload.
"""
import datetime
import io
import json
import os
import tarfile

import numpy as np
import torch.distributed as dist

SHARDS_PER_RANK = 3
SAMPLES_PER_SHARD = 20
OUT = "wds_out"


def shard_name(index, count):
    return f"tokens-{index:0{len(str(count))}d}.tar"


def write_shard(path, index):
    rng = np.random.default_rng(index)
    with tarfile.open(path, "w") as tar:
        for j in range(SAMPLES_PER_SHARD):
            key = f"{index:06d}_{j:04d}"
            for ext, payload in (
                ("tok.npy", rng.integers(0, 32000, 128).astype(np.int32).tobytes()),
                ("json", json.dumps({"key": key, "len": 128}).encode()),
            ):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    os.makedirs(OUT, exist_ok=True)

    mine = [i * world + rank for i in range(SHARDS_PER_RANK)]
    for index in mine:
        write_shard(os.path.join(OUT, shard_name(index, len(mine))), index)

    manifest = [None]
    if rank == 0:
        total = SHARDS_PER_RANK * world
        manifest[0] = {"shards": [shard_name(i, total) for i in range(total)],
                       "samples_per_shard": SAMPLES_PER_SHARD}
    dist.broadcast_object_list(manifest, src=0)
    shards = manifest[0]["shards"]

    checked = 0
    for index in mine:
        with tarfile.open(os.path.join(OUT, shards[index])) as tar:
            n = sum(1 for m in tar.getmembers() if m.name.endswith(".json"))
        assert n == SAMPLES_PER_SHARD, (shards[index], n)
        checked += 1
    print(f"rank {rank}: {checked} shards verified", flush=True)
    dist.barrier()
    if rank == 0:
        with open(os.path.join(OUT, "manifest.json"), "w") as f:
            json.dump(manifest[0], f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
