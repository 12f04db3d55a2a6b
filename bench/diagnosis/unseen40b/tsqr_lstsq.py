import os
import datetime
import torch
import torch.distributed as dist


def local_rows(n_rows, rank, world):
    per = n_rows // world
    start = rank * per
    stop = n_rows if rank == world - 1 else start + per
    return start, stop


def make_system(n_rows, n_cols, seed=11):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n_rows, n_cols, generator=g, dtype=torch.float64)
    x_true = torch.randn(n_cols, 1, generator=g, dtype=torch.float64)
    b = A @ x_true + 1e-3 * torch.randn(n_rows, 1, generator=g, dtype=torch.float64)
    return A, b, x_true


def tsqr_solve(A_loc, b_loc, n_cols, world):
    Q1, R1 = torch.linalg.qr(A_loc, mode="reduced")
    c1 = Q1.T @ b_loc
    Rs = [torch.empty(n_cols, n_cols, dtype=A_loc.dtype) for _ in range(world)]
    cs = [torch.empty(n_cols, 1, dtype=A_loc.dtype) for _ in range(world)]
    dist.all_gather(Rs, R1.contiguous())
    dist.all_gather(cs, c1.contiguous())
    R_stack = torch.cat(Rs, dim=0)
    c_stack = torch.cat(cs, dim=0)
    Q2, R = torch.linalg.qr(R_stack, mode="reduced")
    rhs = Q2.T @ c_stack
    return torch.linalg.solve_triangular(R, rhs, upper=True)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    n_rows = int(os.environ.get("N_ROWS", "400"))
    n_cols = int(os.environ.get("N_COLS", "160"))

    A, b, x_true = make_system(n_rows, n_cols)
    start, stop = local_rows(n_rows, rank, world)
    A_loc, b_loc = A[start:stop].contiguous(), b[start:stop].contiguous()
    print(f"rank {rank}: rows {start}:{stop} of {n_rows}", flush=True)

    x = tsqr_solve(A_loc, b_loc, n_cols, world)
    resid = A_loc @ x - b_loc
    sq = (resid ** 2).sum()
    dist.all_reduce(sq)
    err = (x - x_true).norm() / x_true.norm()
    if rank == 0:
        print(f"residual norm {sq.sqrt().item():.3e}  relative error {err.item():.3e}", flush=True)
        torch.save({"x": x, "n_rows": n_rows, "n_cols": n_cols}, "tsqr_solution.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
