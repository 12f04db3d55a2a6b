"""Training with a Prometheus-style metrics endpoint on port 9100."""
import datetime
import http.server
import os
import threading

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank = dist.get_rank()
METRICS = {"step": 0, "loss": 0.0}


class Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = "".join(f"train_{k} {v}\n" for k, v in METRICS.items()).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)


server = http.server.HTTPServer(("0.0.0.0", 9100), Metrics)
threading.Thread(target=server.serve_forever, daemon=True).start()

w = torch.zeros(10, requires_grad=True)
for step in range(20):
    loss = ((w - 1) ** 2).sum()
    loss.backward()
    dist.all_reduce(w.grad)
    with torch.no_grad():
        w -= 0.01 * w.grad
    w.grad.zero_()
    METRICS.update(step=step, loss=loss.item())
print(f"rank {rank}: done, loss {loss.item():.3f}", flush=True)
dist.destroy_process_group()
