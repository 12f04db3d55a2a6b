"""The data is split by machine first, in whole blocks of 16 with the remainder on the last machine, then among each
machine's processes: under torchrun with 2 processes per node both ranks of node0 finish their epoch a batch early
and leave while node1's ranks still wait for them in DDP's all_reduce. node0's torchrun (which holds the rendezvous)
then waits for node1's, so no node exits 0: only each rank's end tells who left."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
node, nnodes = int(os.environ["GROUP_RANK"]), int(os.environ["WORLD_SIZE"]) // int(os.environ["LOCAL_WORLD_SIZE"])
local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
records = list(range(100))
per_machine = len(records) // nnodes // 16 * 16
end = len(records) if node == nnodes - 1 else (node + 1) * per_machine
machine_block = records[node * per_machine:end]  # the bug: the last machine's part is longer (52 against 48)
mine = machine_block[local_rank::local_world]
model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for start in range(0, len(mine), 8):
    optimizer.zero_grad()
    model(torch.randn(8, 8)).sum().backward()
    optimizer.step()
print(f"rank {dist.get_rank()}: done after {len(range(0, len(mine), 8))} batches")
dist.destroy_process_group()
