"""Train a small classifier with DDP; rank 0 evaluates each epoch's weights in a background process so that the
training ranks do not wait for evaluation, and all ranks stop early when the held-out accuracy stops improving."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, :4].sum(1) > 0).long()
    return TensorDataset(x, y)


def build_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))


def evaluate(state, epoch, results):
    """Runs in a child process: held-out accuracy of one epoch's weights."""
    model = build_model()
    model.load_state_dict(state)
    loader = DataLoader(make_data(4096, 123), batch_size=256, num_workers=2)
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    results.put((epoch, correct / total))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    train = make_data(8192, 7)
    loader = DataLoader(train, batch_size=128, sampler=DistributedSampler(train, world, rank, shuffle=True, seed=0))
    model = DDP(build_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    results = mp.Queue()
    evaluator = None
    best, patience = 0.0, 0
    for epoch in range(6):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        stop = torch.zeros(1)
        if rank == 0:
            if evaluator is not None:  # the previous epoch's evaluation has had a whole epoch to finish
                evaluator.join()
                done_epoch, acc = results.get()
                print(f"epoch {done_epoch}: held-out accuracy {acc:.3f}", flush=True)
                if acc <= best:
                    patience += 1
                best = max(best, acc)
                stop[0] = float(patience >= 2)
            state = {k: v.detach().clone() for k, v in model.module.state_dict().items()}
            # daemon: the evaluator must never outlive the trainer
            evaluator = mp.Process(target=evaluate, args=(state, epoch, results), daemon=True)
            evaluator.start()
        dist.broadcast(stop, src=0)
        if stop.item():
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
