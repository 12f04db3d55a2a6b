"""Training where rank 0 evaluates each epoch's weights in a separate process while the job goes on."""
import datetime
import multiprocessing as mp
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))


def evaluate(state, results):
    model = make_model()
    model.load_state_dict(state)
    g = torch.Generator().manual_seed(99)
    data = TensorDataset(torch.randn(512, 16, generator=g), torch.randint(0, 3, (512,), generator=g))
    correct = 0
    with torch.no_grad():
        for x, y in DataLoader(data, batch_size=64, num_workers=2):
            correct += (model(x).argmax(1) == y).sum().item()
    results.put(correct / len(data))


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    results = mp.Queue()
    pending = None
    g = torch.Generator().manual_seed(rank)
    for epoch in range(4):
        for _ in range(20):
            x, y = torch.randn(32, 16, generator=g), torch.randint(0, 3, (32,), generator=g)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        if rank == 0:
            if pending is not None:
                print(f"epoch {epoch - 1}: eval accuracy {results.get():.3f}", flush=True)
                pending.join()
            state = {k: v.detach().clone() for k, v in model.module.state_dict().items()}
            pending = mp.Process(target=evaluate, args=(state, results), daemon=True)
            pending.start()
        print(f"rank {rank}: epoch {epoch} done", flush=True)
    if rank == 0:
        print(f"epoch 3: eval accuracy {results.get():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
