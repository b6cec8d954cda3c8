"""Python's side of acc_bench_optimizer_step: the same parameter shapes and gradients, torch.optim's
step with fused=True and with its CPU default (the per-parameter loop). Prints
  RESULT <optimizer> <path> <median ms per step>
usage: optimizer_step.py <steps> <width> <layers>"""
import statistics
import sys
import time

import torch


def shapes(width, layers):
    for _ in range(layers):
        yield (width, width)
        yield (width,)


def main(steps, width, layers):
    torch.manual_seed(0)
    for name, make in (("AdamW", lambda ps, fused: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01, fused=fused)),
                       ("SGD", lambda ps, fused: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, fused=fused))):
        for path, fused in (("loop", None), ("fused", True)):
            params = [torch.randn(s, requires_grad=True) for s in shapes(width, layers)]
            for p in params:
                p.grad = torch.randn_like(p)
            optimizer = make(params, fused)
            times = []
            for i in range(steps + 1):  # one warm-up step (state allocation)
                start = time.perf_counter()
                optimizer.step()
                if i > 0:
                    times.append((time.perf_counter() - start) * 1000)
            print(f"RESULT {name} {path} {statistics.median(times):.2f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
