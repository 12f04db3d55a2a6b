import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 8))

    def forward(self, x):
        return self.net(x)


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(512, 512)
        self.embed = nn.Linear(64, 512)
        self.head = nn.Linear(512, 8)

    def forward(self, x):
        return self.head(F.relu(self.hidden(F.relu(self.embed(x)))))


class CompressionState:
    def __init__(self, bits=8):
        self.bits = bits
        self.residuals = {}


def quantized_allreduce_hook(state, bucket):
    grad = bucket.buffer()
    idx = bucket.index()
    if idx in state.residuals:
        grad.add_(state.residuals[idx])
    levels = 2 ** (state.bits - 1) - 1
    scale = grad.abs().max().clamp_min(1e-12)
    dist.all_reduce(scale, op=dist.ReduceOp.MAX)
    q = torch.round(grad / scale * levels)
    deq = q * scale / levels
    state.residuals[idx] = grad - deq
    deq.div_(dist.get_world_size())
    fut = dist.all_reduce(deq, async_op=True).get_future()

    def done(f):
        grad.copy_(f.value()[0])
        return grad

    return fut.then(done)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    teacher = Teacher().eval()
    student = DDP(Student(), bucket_cap_mb=0.5)
    student.register_comm_hook(CompressionState(bits=8), quantized_allreduce_hook)
    opt = torch.optim.AdamW(student.parameters(), lr=1e-3)

    gen = torch.Generator().manual_seed(100 + rank)
    temperature = 2.0
    for step in range(20):
        x = torch.randn(32, 64, generator=gen)
        with torch.no_grad():
            t_logits = teacher(x)
        s_logits = student(x)
        loss = F.kl_div(
            F.log_softmax(s_logits / temperature, dim=-1),
            F.softmax(t_logits / temperature, dim=-1),
            reduction="batchmean",
        ) * temperature ** 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} kd_loss {loss.item():.4f}", flush=True)

    if rank == 0:
        torch.save(student.module.state_dict(), "student.pt")
        print("saved student.pt", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
