"""Training parity: the same MLP regression (same initial weights, same data, SGD, 3 epochs,
batch 4 per process, unshuffled) trained by Python Accelerate on 2 CPU processes and by acc on 2
processes (torchrun). Per-step losses of every rank and the final weights must agree within 1e-5 relative,
and both must agree with a 1-process run on the doubled batch (Accelerate's own
training-equivalence check). Everything is computed in this run.

usage: training_parity.py ACC_TRAIN_BINARY            (the test)
       training_parity.py --accelerate-worker DIR BATCH  (one rank of the Accelerate side)
"""
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np

from compare import close

FEATURES, HIDDEN, SAMPLES, EPOCHS, LR = 4, 16, 48, 3, 0.1
SHAPES = [(HIDDEN, FEATURES), (HIDDEN,), (1, HIDDEN), (1,)]


def write_inputs(directory):
    rng = np.random.default_rng(0)
    weights = [rng.normal(0, 0.5, shape).astype(np.float32) for shape in SHAPES]
    np.concatenate([w.ravel() for w in weights]).tofile(os.path.join(directory, "init.bin"))
    x = rng.normal(0, 1, (SAMPLES, FEATURES)).astype(np.float32)
    y = (np.sin(x @ rng.normal(0, 1, (FEATURES, 1))) + 0.1 * x[:, :1]).astype(np.float32)
    np.concatenate([x.ravel(), y.ravel()]).tofile(os.path.join(directory, "data.bin"))


def accelerate_worker(directory, batch_size):
    import torch
    from accelerate import Accelerator
    from torch.utils.data import DataLoader, TensorDataset

    accelerator = Accelerator(cpu=True)
    flat = np.fromfile(os.path.join(directory, "init.bin"), dtype=np.float32)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                                torch.nn.Linear(HIDDEN, 1))
    offset = 0
    with torch.no_grad():
        for parameter, shape in zip(model.parameters(), SHAPES):
            size = int(np.prod(shape))
            parameter.copy_(torch.from_numpy(flat[offset:offset + size].reshape(shape)))
            offset += size
    data = np.fromfile(os.path.join(directory, "data.bin"), dtype=np.float32)
    x = torch.from_numpy(data[:SAMPLES * FEATURES].reshape(SAMPLES, FEATURES).copy())
    y = torch.from_numpy(data[SAMPLES * FEATURES:].reshape(SAMPLES, 1).copy())
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    losses = []
    for _ in range(EPOCHS):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            losses.append(loss.item())
    tag = f"accelerate_{accelerator.num_processes}"
    with open(os.path.join(directory, f"{tag}_losses_{accelerator.process_index}.txt"), "w") as f:
        f.write("\n".join(f"{v:.9g}" for v in losses) + "\n")
    if accelerator.is_main_process:
        weights = torch.cat([p.detach().reshape(-1) for p in
                             accelerator.unwrap_model(model).parameters()])
        weights.numpy().astype(np.float32).tofile(os.path.join(directory, f"{tag}_weights.bin"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(command, env=None):
    result = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    if result.returncode != 0:
        print("command failed:", " ".join(command), "\n", result.stdout[-4000:],
              result.stderr[-4000:])
        sys.exit(1)


def main(acc_binary):
    python = sys.executable
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    with tempfile.TemporaryDirectory() as directory:
        write_inputs(directory)
        this = os.path.abspath(__file__)
        # torchrun starts both sides' ranks (`accelerate launch --cpu` runs a single process).
        torchrun = [python, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                    "--master_addr", "127.0.0.1"]
        run(torchrun + ["--master_port", str(free_port()), this, "--accelerate-worker",
                        directory, "4"], env)
        run([python, this, "--accelerate-worker", directory, "8"], env)
        run(torchrun + ["--master_port", str(free_port()), "--no-python", acc_binary, directory,
                        "4"], env)
        run([acc_binary, directory, "8"], env)

        def losses(tag, rank):
            return np.loadtxt(os.path.join(directory, f"{tag}_losses_{rank}.txt"), ndmin=1)

        def weights(tag):
            return np.fromfile(os.path.join(directory, f"{tag}_weights.bin"), dtype=np.float32)

        ok = True
        for rank in (0, 1):
            ok &= close(f"per-step losses rank {rank}, acc vs Accelerate (2 processes)",
                        losses("acc_2", rank), losses("accelerate_2", rank))
        ok &= close("per-step losses, acc vs Accelerate (1 process, batch 8)",
                    losses("acc_1", 0), losses("accelerate_1", 0))
        ok &= close("final weights, acc vs Accelerate (2 processes)",
                    weights("acc_2"), weights("accelerate_2"))
        ok &= close("final weights, acc 2 processes vs 1 process on the doubled batch",
                    weights("acc_2"), weights("acc_1"))
        ok &= close("final weights, Accelerate 2 processes vs 1 process on the doubled batch",
                    weights("accelerate_2"), weights("accelerate_1"))
        ok &= close("mean of the ranks' losses, acc 2 processes vs 1 process",
                    (losses("acc_2", 0) + losses("acc_2", 1)) / 2, losses("acc_1", 0))
        return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--accelerate-worker":
        accelerate_worker(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(main(sys.argv[1]))
