"""Audit a tensor-parallel MLP block before exporting its shards as a release.

Each rank holds its tensor-parallel slice of the block; before the export is published the
job checks that the shards add up to the architecture in the config and writes a manifest.
"""
import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn

CONFIG = {"hidden": 256, "ffn": 1024, "layers": 4, "vocab": 1000}


class TPBlock(nn.Module):
    def __init__(self, hidden, ffn, world):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn // world)
        self.fc2 = nn.Linear(ffn // world, hidden, bias=False)
        self.fc2_bias = nn.Parameter(torch.zeros(hidden))


class TPModel(nn.Module):
    def __init__(self, cfg, world):
        super().__init__()
        self.embed = nn.Embedding(cfg["vocab"], cfg["hidden"])
        self.blocks = nn.ModuleList(TPBlock(cfg["hidden"], cfg["ffn"], world) for _ in range(cfg["layers"]))
        self.final_norm = nn.LayerNorm(cfg["hidden"])


def expected_params(cfg):
    h, f, n, v = cfg["hidden"], cfg["ffn"], cfg["layers"], cfg["vocab"]
    per_block = 2 * h + (h * f + f) + (f * h + h)
    return v * h + n * per_block + 2 * h


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    model = TPModel(CONFIG, world)
    vocab_per_rank = CONFIG["vocab"] // world
    if CONFIG["vocab"] % world:
        raise SystemExit("vocab must divide the tensor-parallel size")
    with torch.no_grad():
        model.embed.weight = nn.Parameter(model.embed.weight[rank * vocab_per_rank:(rank + 1) * vocab_per_rank].clone())

    local = sum(p.numel() for p in model.parameters())
    total = torch.tensor([local], dtype=torch.int64)
    dist.all_reduce(total)
    want = expected_params(CONFIG)
    print(f"[rank {rank}] local params {local}, all ranks {int(total)}, config says {want}", flush=True)
    if int(total) != want:
        raise ValueError(f"exported shards hold {int(total)} parameters but the config describes {want}; "
                         f"refusing to publish a partial or corrupted export")

    shapes = {name: list(p.shape) for name, p in model.named_parameters()}
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    os.makedirs("tp_export", exist_ok=True)
    torch.save(state, f"tp_export/mp_rank_{rank:02d}.pt")
    gathered = [None] * world
    dist.all_gather_object(gathered, shapes)
    if rank == 0:
        with open("tp_export/manifest.json", "w") as f:
            json.dump({"config": CONFIG, "tp": world, "params": want, "shapes": gathered}, f)
        print("[rank 0] export manifest written", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
