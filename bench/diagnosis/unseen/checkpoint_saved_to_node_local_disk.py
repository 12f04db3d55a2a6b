"""Resume: rank 0 saves the checkpoint at the end of epoch 1, then every rank reloads it for epoch 2."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
CKPT_DIR = os.path.expanduser("~/checkpoints/run42")
model = torch.nn.Linear(16, 4)
if rank == 0:
    os.makedirs(CKPT_DIR, exist_ok=True)
    torch.save({"epoch": 1, "model": model.state_dict()}, f"{CKPT_DIR}/last.pt")
dist.barrier()
state = torch.load(f"{CKPT_DIR}/last.pt")
model.load_state_dict(state["model"])
print(f"rank {rank}: resumed from epoch {state['epoch']}", flush=True)
dist.barrier()
dist.destroy_process_group()
