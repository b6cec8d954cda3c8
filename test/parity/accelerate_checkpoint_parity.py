"""A run crosses between Python Accelerate and acc through save_state / load_state, both ways,
for SGD (momentum, weight decay) and AdamW, everything computed in this run:

  Python: N steps, accelerator.save_state(py_N) ..................... then M more: the reference
  acc:    load_state(py_N) (optimizer built with other options), M steps        -> == reference
  acc:    N steps, save_state(cpp_N) in Accelerate's layout
  Python: accelerator.load_state(cpp_N) (other options again), M steps          -> == reference

Also: the CPU generator crosses (three torch.rand draws right after the save equal those right
after the load), the scheduler's step count crosses (last_epoch == N), the AdamW run's Python
checkpoint uses pytorch_model.bin (safe_serialization=False), and a Python custom object
(custom_checkpoint_0.pkl) makes acc's load_state warn in one line without failing.

usage: accelerate_checkpoint_parity.py ACC_WORKER                     (the test)
       accelerate_checkpoint_parity.py --python save|resume ...       (one Python phase)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

FEATURES, HIDDEN, SAMPLES, BATCH = 4, 8, 32, 8
N, M = 5, 4
SHAPES = [(HIDDEN, FEATURES), (HIDDEN,), (1, HIDDEN), (1,)]
# Adam's update divides by sqrt(v): float32 rounding differences between libtorch's and PyTorch's
# kernels are amplified a little more than SGD's.
TOLERANCE = {"sgd": 1e-5, "adamw": 2e-5}


def write_inputs(directory):
    rng = np.random.default_rng(7)
    weights = [rng.normal(0, 0.5, shape).astype(np.float32) for shape in SHAPES]
    np.concatenate([w.ravel() for w in weights]).tofile(os.path.join(directory, "init.bin"))
    x = rng.normal(0, 1, (SAMPLES, FEATURES)).astype(np.float32)
    y = (np.sin(x @ rng.normal(0, 1, (FEATURES, 1))) + 0.1 * x[:, :1]).astype(np.float32)
    np.concatenate([x.ravel(), y.ravel()]).tofile(os.path.join(directory, "data.bin"))


class Counter:
    """A registered custom object: its pickle has no C++ counterpart."""

    def __init__(self):
        self.value = 0

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


def python_phase(mode, kind, checkpoint, data_dir, out):
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    flat = np.fromfile(os.path.join(data_dir, "init.bin"), dtype=np.float32)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1))
    offset = 0
    with torch.no_grad():
        for parameter, shape in zip(model.parameters(), SHAPES):
            size = int(np.prod(shape))
            parameter.copy_(torch.from_numpy(flat[offset:offset + size].reshape(shape)))
            offset += size
    data = np.fromfile(os.path.join(data_dir, "data.bin"), dtype=np.float32)
    x = torch.from_numpy(data[:SAMPLES * FEATURES].reshape(SAMPLES, FEATURES).copy())
    y = torch.from_numpy(data[SAMPLES * FEATURES:].reshape(SAMPLES, 1).copy())
    resumed = mode == "resume"
    if kind == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.7 if resumed else 0.05,
                                    momentum=0.1 if resumed else 0.9, weight_decay=0.0 if resumed else 1e-3)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.7 if resumed else 0.01,
                                      betas=(0.5, 0.5) if resumed else (0.9, 0.99),
                                      weight_decay=0.0 if resumed else 0.05)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=1.0)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    if not resumed:
        accelerator.register_for_checkpointing(Counter())

    def train(first, last):
        for step in range(first, last):
            start = (step % (SAMPLES // BATCH)) * BATCH
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[start:start + BATCH]), y[start:start + BATCH])
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()

    def print_rand():
        draws = torch.rand(3, dtype=torch.float64)
        print("rand: " + " ".join(repr(float(v)) for v in draws), flush=True)

    if resumed:
        accelerator.load_state(checkpoint)
        print_rand()
        print(f"scheduler_step: {scheduler.scheduler.last_epoch} {scheduler.scheduler._step_count}", flush=True)
        group = optimizer.param_groups[0]
        print(f"lr: {group['lr']} weight_decay: {group['weight_decay']}", flush=True)
        train(N, N + M)
    else:
        train(0, N)
        accelerator.save_state(checkpoint, safe_serialization=(kind == "sgd"))
        print_rand()
        train(N, N + M)
    torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().astype(np.float32).tofile(out)


def run(command, what):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    print(f"--- {what}\n{result.stdout}", end="")
    if result.returncode != 0:
        raise SystemExit(f"FAIL: {what} exited {result.returncode}")
    return result.stdout


def line(output, key):
    for text in output.splitlines():
        if text.startswith(key + ":"):
            return text[len(key) + 1:].split()
    raise SystemExit(f"FAIL: no '{key}:' line in the output")


def main(worker):
    ok = True
    with tempfile.TemporaryDirectory() as directory:
        write_inputs(directory)
        me = [sys.executable, os.path.abspath(__file__), "--python"]
        for kind in ("sgd", "adamw"):
            py_n = os.path.join(directory, f"py_{kind}")
            cpp_n = os.path.join(directory, f"cpp_{kind}")
            reference = os.path.join(directory, f"reference_{kind}.bin")
            out = run(me + ["save", kind, py_n, directory, reference], f"Python {kind}: {N} steps, save_state, {M} more")
            py_rand = floats(line(out, "rand"))
            expected = np.fromfile(reference, dtype=np.float32)

            # Python -> C++
            resumed = os.path.join(directory, f"cpp_from_py_{kind}.bin")
            out = run([worker, "resume", kind, py_n, directory, str(N), str(M), resumed],
                      f"acc {kind}: load_state of Python's checkpoint, {M} steps")
            ok &= report_diff(f"{kind} Python {N} -> acc {M} vs Python {N + M}", np.fromfile(resumed, dtype=np.float32),
                              expected, TOLERANCE[kind])
            ok &= check(floats(line(out, "rand")) == py_rand, f"{kind}: acc's generator after load_state continues Python's "
                        f"({line(out, 'rand')} vs {py_rand})")
            ok &= check(line(out, "scheduler_step") == [str(N)], f"{kind}: acc's scheduler step after load_state is {N}")
            ok &= check("custom_checkpoint_0.pkl" in out and "was not restored" in out,
                        f"{kind}: acc warns that Python's custom_checkpoint_0.pkl cannot cross")
            if kind == "adamw":
                ok &= check(os.path.exists(os.path.join(py_n, "pytorch_model.bin")),
                            "the AdamW case loads a Python pytorch_model.bin")

            # C++ -> Python
            out = run([worker, "save", kind, cpp_n, directory, str(N)], f"acc {kind}: {N} steps, save_state (Accelerate)")
            cpp_rand = floats(line(out, "rand"))
            from_cpp = os.path.join(directory, f"py_from_cpp_{kind}.bin")
            out = run(me + ["resume", kind, cpp_n, directory, from_cpp], f"Python {kind}: load_state of acc's, {M} steps")
            ok &= report_diff(f"{kind} acc {N} -> Python {M} vs Python {N + M}", np.fromfile(from_cpp, dtype=np.float32),
                              expected, TOLERANCE[kind])
            ok &= check(floats(line(out, "rand")) == cpp_rand, f"{kind}: Python's generator after load_state continues acc's "
                        f"({line(out, 'rand')} vs {cpp_rand})")
            ok &= check(line(out, "scheduler_step") == [str(N), str(N + 1)],
                        f"{kind}: Python's scheduler after load_state has last_epoch {N}, _step_count {N + 1}")
            options = line(out, "lr")
            ok &= check(float(options[0]) == (0.05 if kind == "sgd" else 0.01),
                        f"{kind}: Python's optimizer took acc's learning rate ({options[0]})")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def report_diff(name, a, b, tolerance):
    """Max absolute difference of the final weights (they are O(1))."""
    worst = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.shape == b.shape else float("inf")
    moved = float(np.max(np.abs(b.astype(np.float64))))
    print(f"{name}: max abs diff {worst:.3e} (tolerance {tolerance:.0e}, largest weight {moved:.3f})")
    return worst <= tolerance


def floats(words):
    """Both sides print 17 significant digits or Python's shortest repr: equal doubles, exactly."""
    return [float(w) for w in words]


def check(condition, what):
    print(("ok: " if condition else "FAIL: ") + what)
    return bool(condition)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--python":
        python_phase(*sys.argv[2:7])
    elif len(sys.argv) == 2:
        sys.exit(main(sys.argv[1]))
    else:
        print(__doc__)
        sys.exit(2)
