"""acc against Python Accelerate, side by side, in one run (a benchmark: it reports, it does not
judge; it exits non-zero only when a run fails, or with --loss-rtol when the losses disagree).

The same model, initial weights, data and global batch are trained on 2 CPU ranks (Gloo over
loopback, OMP_NUM_THREADS=1 per rank, SGD, unshuffled data, each rank half of the global batch) by
  Accelerate  this script's --accelerate-worker mode: accelerate.Accelerator(cpu=True,
              mixed_precision=...), under torchrun (`accelerate launch --cpu --num_processes 2`
              starts ONE process: with --cpu it takes its simple launcher, which only goes
              multi-process through mpirun and a hostfile)
  acc         build/bin/acc_bench_vs_accelerate (vs_accelerate.cpp) under build/bin/acc-launch --cpu
in ABAB pairs (Accelerate first in each pair). The initial weights (safetensors, from PyTorch's
default initialisation with seed 0) and the data are written once into a temporary directory and
read by both sides. Every rank writes a JSON file; for each model and precision this prints the
medians over the pairs and the ratio acc/Accelerate of:
  samples/s                 global batch x timed steps / wall time of the timed steps (after the
                            warm-up steps), the slower rank's; higher is better
  samples per CPU-second    the same samples / the CPU time (every thread) all ranks' processes
                            spent in those steps: the cost of a sample, whatever share of the CPUs
                            the ranks got; higher is better
  peak RSS rank R           VmHWM of rank R's process at the end of training; lower is better.
                            The launcher processes (torchrun's Python, acc-launch) are not counted
  launch to first step      from the driver's clock (CLOCK_REALTIME, BENCH_T0_NS) just before it
                            starts the launcher to the end of the first optimizer step, the later
                            rank's: process start, imports/dynamic loading, rendezvous, weights and
                            data loading, prepare(), the first step; lower is better
  losses                    every rank's loss at every step, acc against Accelerate: bit-identical,
                            or the largest relative difference (and whether each side repeated itself
                            exactly across its runs)
Models: mlp  16 x Linear(256, 256) with Tanh between (bench/support/mlp.h), MSE to random targets,
             global batch 128
        lm   causal transformer LM: 4 pre-norm blocks (bench/device/device_step.py's Block), d 256,
             4 heads, MLP 4 d, vocab 2048, seq 64, cross-entropy, global batch 16 sequences
each in fp32 and bf16 (Accelerate: mixed_precision="bf16", autocast around forward and outputs
converted to fp32; acc: mixed_precision(BF16), autocast on for the training thread, the output
converted to fp32 before the loss).

Scheduling: torchrun starts each rank in a new session; acc-launch keeps its ranks in its own
session. With Linux's autogroup scheduling (kernel.sched_autogroup_enabled=1) each session is one
scheduling group, so on a machine with other load torchrun's two ranks get two shares of the CPUs
and acc-launch's two ranks one: samples/s then favours Accelerate for reasons unrelated to either
runtime (the script prints a note). --chrt (SCHED_FIFO) takes the ranks out of that competition;
samples per CPU-second does not depend on it.

usage: vs_accelerate.py [--pairs 3] [--steps N] [--warmup 3] [--models mlp,lm]
                        [--precisions fp32,bf16] [--build build] [--chrt] [--loss-rtol X]
(run with the venv's Python: ${ACC_VENV:-$HOME/.cache/acc/venv}/bin/python)
"""
import argparse
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

MLP_LAYERS, MLP_WIDTH = 16, 256
VOCAB, SEQ, DIM, HEADS, BLOCKS = 2048, 64, 256, 4, 4
# global batch, timed steps by default, SGD learning rate
SIZES = {"mlp": (128, 50, 0.01), "lm": (16, 20, 0.1)}
RUN_TIMEOUT_S = 300


def build_model(name):
    import torch
    import torch.nn.functional as F

    if name == "mlp":
        layers = []
        for i in range(MLP_LAYERS):
            layers.append(torch.nn.Linear(MLP_WIDTH, MLP_WIDTH))
            if i + 1 < MLP_LAYERS:
                layers.append(torch.nn.Tanh())
        return torch.nn.Sequential(*layers)

    # The block of the GPU benchmark (bench/device/device_step.py), which vs_accelerate.cpp mirrors.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "device"))
    from device_step import Block

    class Lm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, DIM)
            self.blocks = torch.nn.ModuleList(Block(DIM, HEADS, 4 * DIM) for _ in range(BLOCKS))
            self.norm = torch.nn.LayerNorm(DIM)
            self.head = torch.nn.Linear(DIM, VOCAB, bias=False)

        def forward(self, tokens):
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    return Lm()


def write_inputs(directory, name, samples):
    """init_<name>.safetensors (PyTorch's default initialisation, seed 0) and data_<name>.safetensors."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = build_model(name)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(directory, f"init_{name}.safetensors"))
    if name == "mlp":
        data = {"x": torch.randn(samples, MLP_WIDTH), "y": torch.randn(samples, MLP_WIDTH)}
    else:
        data = {"x": torch.randint(VOCAB, (samples, SEQ + 1))}
    save_file(data, os.path.join(directory, f"data_{name}.safetensors"))


def accelerate_worker(directory, name, precision, warmup, steps, global_batch, lr, tag):
    """One rank of the Accelerate side; the loop of vs_accelerate.cpp."""
    t0_ns = int(os.environ.get("BENCH_T0_NS", time.time_ns()))
    import torch
    import torch.nn.functional as F
    from accelerate import Accelerator
    from safetensors.torch import load_file
    from torch.utils.data import DataLoader, TensorDataset

    accelerator = Accelerator(cpu=True, mixed_precision="bf16" if precision == "bf16" else "no")
    model = build_model(name)
    model.load_state_dict(load_file(os.path.join(directory, f"init_{name}.safetensors")))
    data = load_file(os.path.join(directory, f"data_{name}.safetensors"))
    dataset = TensorDataset(data["x"]) if name == "lm" else TensorDataset(data["x"], data["y"])
    loader = DataLoader(dataset, batch_size=global_batch // accelerator.num_processes, shuffle=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    losses, first_step_ns = [], 0
    start, start_cpu = time.perf_counter(), time.process_time()
    for batch in loader:
        if len(losses) == warmup:
            start, start_cpu = time.perf_counter(), time.process_time()
        optimizer.zero_grad()
        if name == "lm":
            tokens = batch[0]
            output = model(tokens[:, :SEQ])
            loss = F.cross_entropy(output.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        else:
            inputs, targets = batch
            loss = F.mse_loss(model(inputs), targets)
        accelerator.backward(loss)
        optimizer.step()
        losses.append(loss.item())
        if len(losses) == 1:
            first_step_ns = time.time_ns()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    if len(losses) != warmup + steps:
        sys.exit(f"vs_accelerate: {len(losses)} steps, expected {warmup + steps}")
    result = {"rank": accelerator.process_index, "world": accelerator.num_processes,
              "samples_per_s": global_batch * steps / elapsed, "cpu_s": cpu, "peak_rss_mib": peak_rss_mib(),
              "first_step_s": (first_step_ns - t0_ns) / 1e9, "losses": losses}
    with open(os.path.join(directory, f"{tag}_rank{accelerator.process_index}.json"), "w") as f:
        json.dump(result, f)
    accelerator.end_training()


def peak_rss_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return -1.0


def autogroup_on():
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunFailed(Exception):
    pass


def run_job(command, directory, tag, world):
    """Starts `command` (a launcher) in its own session with BENCH_T0_NS; returns the ranks' results."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "ACCELERATE_MIXED_PRECISION", "ACCELERATE_USE_CPU"):
        env.pop(name, None)
    env["BENCH_T0_NS"] = str(time.time_ns())
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise RunFailed(f"timed out after {RUN_TIMEOUT_S} s: {' '.join(command)}\n{output[-4000:]}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    results = []
    for rank in range(world):
        path = os.path.join(directory, f"{tag}_rank{rank}.json")
        if process.returncode != 0 or not os.path.exists(path):
            raise RunFailed(f"exit status {process.returncode}, {path} "
                            f"{'written' if os.path.exists(path) else 'missing'}: {' '.join(command)}\n"
                            f"{output[-4000:]}")
        with open(path) as f:
            results.append(json.load(f))
    return results


def compare_losses(acc_runs, accelerate_runs):
    """(max relative difference acc vs Accelerate, each side identical across its own runs)."""
    def flat(run):
        return [loss for rank in run for loss in rank["losses"]]

    a, b = [flat(r) for r in acc_runs], [flat(r) for r in accelerate_runs]
    worst = 0.0
    for x, y in zip(a[0], b[0]):
        if x != y:
            worst = max(worst, abs(x - y) / max(abs(y), 1e-30)) if math.isfinite(x - y) else math.inf
    return worst, all(r == a[0] for r in a), all(r == b[0] for r in b), len(a[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="ABAB pairs per model and precision")
    parser.add_argument("--steps", type=int, help="timed steps (default: mlp 50, lm 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before them")
    parser.add_argument("--models", default="mlp,lm")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--build", default=os.path.join(REPO, "build"), help="acc's build directory")
    parser.add_argument("--chrt", action="store_true", help="run every job under chrt -f 50")
    parser.add_argument("--loss-rtol", type=float,
                        help="exit 1 when acc's and Accelerate's losses differ by more than this")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    precisions = [p for p in args.precisions.split(",") if p]
    if not set(models) <= set(SIZES) or not set(precisions) <= {"fp32", "bf16"} or args.pairs < 1:
        parser.error("models are mlp,lm; precisions fp32,bf16; --pairs at least 1")
    build = os.path.abspath(args.build)
    launcher = os.path.join(build, "bin", "acc-launch")
    program = os.path.join(build, "bin", "acc_bench_vs_accelerate")
    for path in (launcher, program):
        if not os.access(path, os.X_OK):
            sys.exit(f"vs_accelerate: {path} is missing; build it: "
                     f"ninja -C {args.build} acc-launch acc_bench_vs_accelerate")
    prefix = []
    if args.chrt:
        if subprocess.run(["chrt", "-f", "50", "true"], capture_output=True).returncode != 0:
            sys.exit("vs_accelerate: --chrt: chrt -f 50 is not permitted here")
        prefix = ["chrt", "-f", "50"]
    world = 2
    python = sys.executable
    this = os.path.abspath(__file__)

    import torch
    import accelerate
    print(f"vs_accelerate: acc ({program}) against Accelerate {accelerate.__version__} "
          f"(torch {torch.__version__}), {world} CPU ranks each, Gloo on loopback, OMP_NUM_THREADS=1, "
          f"{args.pairs} ABAB pair(s){', chrt -f 50' if prefix else ''}")
    if not prefix and autogroup_on():
        print("note: autogroup scheduling is on (kernel.sched_autogroup_enabled): torchrun starts each rank "
              "in a session of its own, acc-launch keeps its ranks in its one, so while anything else "
              "runs on this machine torchrun's ranks get a larger share of the CPUs and samples/s "
              "favours Accelerate; --chrt avoids that, samples per CPU-second does not depend on it")
    failed_agreement = False
    with tempfile.TemporaryDirectory(prefix="vs_accelerate.") as directory:
        for name in models:
            global_batch, default_steps, lr = SIZES[name]
            steps = args.steps if args.steps is not None else default_steps
            write_inputs(directory, name, global_batch * (args.warmup + steps))
            for precision in precisions:
                job = [directory, name, precision, str(args.warmup), str(steps), str(global_batch), repr(lr)]
                runs = {"accelerate": [], "acc": []}
                for pair in range(args.pairs):
                    for side in ("accelerate", "acc"):
                        tag = f"{name}_{precision}_{side}_{pair}"
                        if side == "accelerate":
                            command = prefix + [python, "-m", "torch.distributed.run", "--nproc_per_node",
                                                str(world), "--master_addr", "127.0.0.1", "--master_port",
                                                str(free_port()), this, "--accelerate-worker"] + job + [tag]
                        else:
                            command = prefix + [launcher, "--cpu", "--num_processes", str(world),
                                                "--main_process_ip", "127.0.0.1", "--main_process_port",
                                                str(free_port()), program] + job + [tag]
                        try:
                            runs[side].append(run_job(command, directory, tag, world))
                        except RunFailed as error:
                            print(f"vs_accelerate: {name} {precision} {side} run {pair} failed: {error}",
                                  file=sys.stderr)
                            return 1
                failed_agreement |= report(name, precision, global_batch, args.warmup, steps, lr, args.pairs,
                                           runs, args.loss_rtol)
    return 1 if failed_agreement else 0


def report(name, precision, global_batch, warmup, steps, lr, pairs, runs, loss_rtol):
    what = (f"MLP {MLP_LAYERS} x Linear({MLP_WIDTH}, {MLP_WIDTH}), Tanh" if name == "mlp" else
            f"LM {BLOCKS} blocks, d {DIM}, {HEADS} heads, vocab {VOCAB}, seq {SEQ}")
    print(f"\n{name} {precision}: {what}; global batch {global_batch} ({global_batch // 2} per rank), "
          f"SGD lr {lr}, {warmup} warm-up + {steps} timed steps, median of {pairs}")
    print(f"  {'':28}{'Accelerate':>12}{'acc':>12}   acc/Accelerate")

    def row(label, measure, better):
        values = {side: statistics.median(measure(run) for run in runs[side]) for side in runs}
        ratio = values["acc"] / values["accelerate"] if values["accelerate"] else math.nan
        print(f"  {label:28}{values['accelerate']:12.2f}{values['acc']:12.2f}   {ratio:6.3f} ({better} is better)")

    row("samples/s", lambda run: min(rank["samples_per_s"] for rank in run), "higher")
    samples = global_batch * steps
    row("samples per CPU-second", lambda run: samples / sum(rank["cpu_s"] for rank in run), "higher")
    for rank in range(len(runs["acc"][0])):
        row(f"peak RSS rank {rank} (MiB)", lambda run, rank=rank: run[rank]["peak_rss_mib"], "lower")
    row("launch to first step (s)", lambda run: max(rank["first_step_s"] for rank in run), "lower")
    worst, acc_repeats, accelerate_repeats, count = compare_losses(runs["acc"], runs["accelerate"])
    repeat = ("one run per side" if pairs == 1 else
              "each side repeated its losses exactly across runs" if acc_repeats and accelerate_repeats else
              f"runs NOT repeatable: acc {'same' if acc_repeats else 'varies'}, "
              f"Accelerate {'same' if accelerate_repeats else 'varies'}; first runs compared")
    agreement = ("bit-identical" if worst == 0 else f"agree within max relative difference {worst:.3g}")
    print(f"  losses ({count}: {len(runs['acc'][0])} ranks x {warmup + steps} steps): {agreement}; {repeat}")
    if loss_rtol is not None and not worst <= loss_rtol:
        print(f"  losses differ by more than --loss-rtol {loss_rtol}")
        return True
    return False


if __name__ == "__main__":
    if len(sys.argv) == 10 and sys.argv[1] == "--accelerate-worker":
        a = sys.argv[2:]
        accelerate_worker(a[0], a[1], a[2], int(a[3]), int(a[4]), int(a[5]), float(a[6]), a[7])
    else:
        sys.exit(main())
