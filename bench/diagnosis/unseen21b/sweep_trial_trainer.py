"""One trial of a hyperparameter sweep: rank 0 samples the trial config and shares it with the workers."""
import datetime
import json
import os
import random
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclass
class OptimConfig:
    lr: float = 1e-2
    momentum: float = 0.9
    weight_decay: float = 0.0


@dataclass
class ModelConfig:
    d_in: int = 20
    hidden: int = 64
    dropout: float = 0.1


@dataclass
class TrialConfig:
    trial_id: str = "trial-0"
    steps: int = 30
    batch_size: int = 32
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)


SEARCH_SPACE = {"optim.lr": [3e-3, 1e-2, 3e-2], "optim.weight_decay": [0.0, 1e-4],
                "model.hidden": [32, 64, 128]}


def sample_trial() -> TrialConfig:
    cfg = TrialConfig(trial_id=f"trial-{random.randrange(10**6):06d}")
    for key, choices in SEARCH_SPACE.items():
        section, name = key.split(".")
        setattr(getattr(cfg, section), name, random.choice(choices))
    return cfg


def share_trial(cfg):
    payload = [json.dumps(asdict(cfg)) if cfg is not None else None]
    dist.broadcast_object_list(payload, src=0)
    if cfg is None:
        cfg = TrialConfig(**json.loads(payload[0]))
    return cfg


def build_model(cfg: TrialConfig) -> nn.Module:
    m = cfg.model
    return nn.Sequential(nn.Linear(m.d_in, m.hidden), nn.ReLU(), nn.Dropout(m.dropout),
                         nn.Linear(m.hidden, 1))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    cfg = sample_trial() if rank == 0 else None
    cfg = share_trial(cfg)
    if rank == 0:
        print(f"{cfg.trial_id}: {json.dumps(asdict(cfg))}", flush=True)

    torch.manual_seed(1000 + rank)
    model = DDP(build_model(cfg))
    opt = torch.optim.SGD(model.parameters(), lr=cfg.optim.lr, momentum=cfg.optim.momentum,
                          weight_decay=cfg.optim.weight_decay)
    w_true = torch.randn(cfg.model.d_in, 1, generator=torch.Generator().manual_seed(7))

    for step in range(cfg.steps):
        x = torch.randn(cfg.batch_size, cfg.model.d_in)
        y = x @ w_true
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)

    final = torch.tensor([loss.item()])
    dist.all_reduce(final)
    if rank == 0:
        print(f"{cfg.trial_id}: mean final loss {final.item() / world:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
