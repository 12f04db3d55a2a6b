import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class AdaHessian(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, betas=(0.9, 0.999), eps=1e-4, hessian_power=1.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, hessian_power=hessian_power))

    def hutchinson_diag(self, params, grads):
        zs = [torch.randint_like(p, 2) * 2.0 - 1.0 for p in params]
        hzs = torch.autograd.grad(grads, params, grad_outputs=zs, retain_graph=False)
        return [hz * z for hz, z in zip(hzs, zs)]

    @torch.no_grad()
    def step(self):
        params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        grads = [p.grad for p in params]
        with torch.enable_grad():
            diags = self.hutchinson_diag(params, grads)
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p, d in zip(params, diags):
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["m"] = torch.zeros_like(p)
                    st["v"] = torch.zeros_like(p)
                st["step"] += 1
                st["m"].mul_(b1).add_(p.grad.detach(), alpha=1 - b1)
                st["v"].mul_(b2).addcmul_(d, d, value=1 - b2)
                bc1 = 1 - b1 ** st["step"]
                bc2 = 1 - b2 ** st["step"]
                denom = (st["v"] / bc2).sqrt().pow(group["hessian_power"]).add_(group["eps"])
                p.addcdiv_(st["m"], denom, value=-group["lr"] / bc1)


def make_data(rank, n=256, d=16):
    g = torch.Generator().manual_seed(7)
    w_true = torch.randn(d, 1, generator=g)
    g.manual_seed(100 + rank)
    x = torch.randn(n, d, generator=g)
    y = torch.tanh(x @ w_true) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    model = DDP(net)
    opt = AdaHessian(model.parameters(), lr=0.05)
    x, y = make_data(rank)

    for epoch in range(10):
        for i in range(0, x.size(0), 64):
            xb, yb = x[i:i + 64], y[i:i + 64]
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward(create_graph=True)
            opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"epoch {epoch} mse {t.item():.5f}", flush=True)

    if rank == 0:
        torch.save(net.state_dict(), "adahessian_reg.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
