"""Compares acc's schedules (printed by lr_sequences) with torch.optim.lr_scheduler compositions
computed now, in this run, with the venv's torch. Usage: lr_scheduler_parity.py <lr_sequences>"""
import math
import subprocess
import sys

import torch
from torch.optim import lr_scheduler as S


def sequence(make, lr, steps):
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    scheduler = make(optimizer)
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def warmup_then(warmup, after):
    """transformers' schedules are LambdaLRs of this shape."""
    return lambda s: s / max(1, warmup) if s < warmup else after(s)


def linear(w, t):
    return warmup_then(w, lambda s: max(0.0, (t - s) / max(1, t - w)))


def cosine(w, t, cycles=0.5):
    return warmup_then(w, lambda s: max(0.0, 0.5 * (1 + math.cos(math.pi * cycles * 2 * (s - w) / max(1, t - w)))))


REFERENCE = {
    "linear_warmup": (0.1, 12, lambda o: S.LambdaLR(o, linear(3, 10))),
    "linear_no_warmup": (0.1, 10, lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=10)),
    "cosine_warmup": (0.1, 12, lambda o: S.LambdaLR(o, cosine(3, 10))),
    "cosine_cycles": (0.1, 12, lambda o: S.LambdaLR(o, cosine(2, 10, 1.5))),
    "cosine_no_warmup": (0.1, 10, lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.0)),
    "constant_warmup": (0.1, 8, lambda o: S.SequentialLR(
        o, [S.LambdaLR(o, lambda s: s / 4), S.ConstantLR(o, factor=1.0, total_iters=0)], milestones=[4])),
    "lambda_exp": (0.2, 6, lambda o: S.LambdaLR(o, lambda s: 0.9 ** s)),
    "onecycle_cos": (0.01, 20, lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=20, cycle_momentum=False)),
    "onecycle_linear_three_phase": (0.01, 20, lambda o: S.OneCycleLR(
        o, max_lr=0.5, total_steps=20, cycle_momentum=False, anneal_strategy="linear", three_phase=True,
        pct_start=0.25)),
    "wrapped_cosine_warmup": (0.1, 12, lambda o: S.LambdaLR(o, cosine(3, 10))),
}


def main():
    out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
    ours = {line.split()[0]: [float(v) for v in line.split()[1:]] for line in out.splitlines() if line.strip()}
    failures = 0
    for name, (lr, steps, make) in REFERENCE.items():
        expected = sequence(make, lr, steps)
        got = ours.get(name)
        if got is None or len(got) != len(expected) or any(
                not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(got, expected)):
            failures += 1
            print(f"MISMATCH {name}\n  acc:   {got}\n  torch: {expected}")
        else:
            print(f"ok {name}: {len(got)} rates")
    missing = set(ours) - set(REFERENCE)
    if missing:
        failures += 1
        print(f"schedules without a torch reference: {sorted(missing)}")
    print(f"{len(REFERENCE) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
