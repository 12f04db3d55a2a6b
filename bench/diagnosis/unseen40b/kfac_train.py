import os
import math
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist


class KFAC:
    def __init__(self, model, lr=0.05, damping=1e-2, decay=0.95, inv_every=5):
        self.layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
        self.lr, self.damping, self.decay, self.inv_every = lr, damping, decay, inv_every
        self.a, self.g, self.A, self.G, self.inv = {}, {}, {}, {}, {}
        self.steps = 0
        for m in self.layers:
            m.register_forward_hook(self._save_input)
            m.register_full_backward_hook(self._save_grad)

    def _save_input(self, m, inp, out):
        self.a[m] = inp[0].detach()

    def _save_grad(self, m, gin, gout):
        self.g[m] = gout[0].detach()

    def _update_factors(self):
        for m in self.layers:
            a, g = self.a[m], self.g[m]
            A_new = a.T @ a / a.size(0)
            G_new = g.T @ g * g.size(0)
            if m not in self.A:
                self.A[m], self.G[m] = A_new, G_new
            else:
                self.A[m].mul_(self.decay).add_(A_new, alpha=1 - self.decay)
                self.G[m].mul_(self.decay).add_(G_new, alpha=1 - self.decay)
            dist.all_reduce(self.A[m])
            dist.all_reduce(self.G[m])

    def _invert(self):
        for m in self.layers:
            A, G = self.A[m], self.G[m]
            pi = math.sqrt((A.trace() / A.size(0)) / (G.trace() / G.size(0)))
            eye_a = torch.eye(A.size(0))
            eye_g = torch.eye(G.size(0))
            La = torch.linalg.cholesky(A + pi * math.sqrt(self.damping) * eye_a)
            Lg = torch.linalg.cholesky(G + math.sqrt(self.damping) / pi * eye_g)
            self.inv[m] = (torch.cholesky_inverse(La), torch.cholesky_inverse(Lg))

    @torch.no_grad()
    def step(self):
        self._update_factors()
        if self.steps % self.inv_every == 0:
            self._invert()
        for m in self.layers:
            dist.all_reduce(m.weight.grad, op=dist.ReduceOp.AVG)
            Ainv, Ginv = self.inv[m]
            m.weight.add_(Ginv @ m.weight.grad @ Ainv, alpha=-self.lr)
        self.steps += 1


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32, bias=False), nn.Tanh(), nn.Linear(32, 4, bias=False))
    opt = KFAC(model)
    g = torch.Generator().manual_seed(rank + 3)
    w = torch.randn(20, 4, generator=torch.Generator().manual_seed(5))
    for step in range(300):
        x = torch.randn(64, 20, generator=g)
        y = (x @ w).argmax(dim=1)
        loss = F.cross_entropy(model(x), y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if rank == 0 and step % 25 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save(model.state_dict(), "kfac_model.pt")
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
