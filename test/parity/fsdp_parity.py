"""FSDP parity with Python, computed in this run: the same model (same initial weights), the same data,
Adam, 10 steps, batch 4 per process, unshuffled, SHARD_GRAD_OP or FULL_SHARD (--strategy) on 2 CPU processes
(Gloo, loopback), trained by torch's FullyShardedDataParallel and by acc (both under torchrun). Every rank's per-step losses and the
final weights must agree within 1e-5 relative; each side must have held Adam state for at most its shard.

The Python side is torch FSDP itself, not Accelerate: Accelerate 1.15 turns FSDP on only for GPU-like
devices, so on CPU it silently trains DDP (distributed_type MULTI_CPU, model DistributedDataParallel) even
with ACCELERATE_USE_FSDP=true or an explicit FullyShardedDataParallelPlugin. FSDP is wrapped as
Accelerate's FSDP1 path would wrap it on a GPU with its defaults (whole model one unit,
use_orig_params=False, sync_module_states=False). acc's side gets FSDP from the environment Accelerate's launcher exports
(ACCELERATE_USE_FSDP=true, FSDP_SHARDING_STRATEGY=the strategy). Under FULL_SHARD the whole model is one
unit on both sides (NO_WRAP, Accelerate's default); acc's model runs the forward seam, so its parameters are
released between steps as torch's are.

The model has 7 parameter tensors, two of one element (a bias and a gain), 111 elements in all, so
both sides pad their flat buffer to 112 and one rank's shard ends in padding.

usage: fsdp_parity.py ACC_FSDP_PARITY_BINARY [--strategy SHARD_GRAD_OP|FULL_SHARD]   (the test)
       fsdp_parity.py --torch-worker DIR STRATEGY                                (one rank of the torch FSDP side)
"""
import math
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np

from compare import TOLERANCE, close

FEATURES, HIDDEN, MIDDLE, STEPS, BATCH, WORLD, LR = 4, 15, 2, 10, 4, 2, 0.01
SAMPLES = STEPS * BATCH * WORLD


def build_model():
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = torch.nn.Parameter(torch.ones(1))  # FSDP1 refuses 0-dim parameters
            self.l1 = torch.nn.Linear(FEATURES, HIDDEN)
            self.l2 = torch.nn.Linear(HIDDEN, MIDDLE)
            self.l3 = torch.nn.Linear(MIDDLE, 1)

        def forward(self, x):
            return self.l3(torch.tanh(self.l2(torch.tanh(self.l1(x))))) * self.gain

    return Net()


def write_inputs(directory):
    """init.bin (parameters in registration order), names.txt (name and shape, one a line: acc checks
    its model against it), data.bin (x then y)."""
    model = build_model()
    rng = np.random.default_rng(8)
    weights, lines = [], []
    for name, parameter in model.named_parameters():
        weights.append(rng.normal(0, 0.5, tuple(parameter.shape)).astype(np.float32))
        lines.append(" ".join([name] + [str(d) for d in parameter.shape]))
    np.concatenate([w.ravel() for w in weights]).tofile(os.path.join(directory, "init.bin"))
    with open(os.path.join(directory, "names.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    x = rng.normal(0, 1, (SAMPLES, FEATURES)).astype(np.float32)
    y = (np.sin(x @ rng.normal(0, 1, (FEATURES, 1))) + 0.1 * x[:, :1]).astype(np.float32)
    np.concatenate([x.ravel(), y.ravel()]).tofile(os.path.join(directory, "data.bin"))
    return sum(w.size for w in weights)


def torch_worker(directory, strategy):
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    net = build_model()
    flat = np.fromfile(os.path.join(directory, "init.bin"), dtype=np.float32)
    offset = 0
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.copy_(torch.from_numpy(flat[offset:offset + parameter.numel()]).view(parameter.shape))
            offset += parameter.numel()
    model = FSDP(net, sharding_strategy=ShardingStrategy[strategy], device_id=torch.device("cpu"),
                 use_orig_params=False)  # sync_module_states=True needs GPU tensors; every rank read init.bin
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    data = np.fromfile(os.path.join(directory, "data.bin"), dtype=np.float32)
    x = torch.from_numpy(data[:SAMPLES * FEATURES].reshape(SAMPLES, FEATURES).copy())
    y = torch.from_numpy(data[SAMPLES * FEATURES:].reshape(SAMPLES, 1).copy())
    losses = []
    for step in range(STEPS):
        # Accelerate's sharding of an unshuffled loader: rank r takes batches r, r + world, ...
        first = (step * world + rank) * BATCH
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[first:first + BATCH]), y[first:first + BATCH])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with open(os.path.join(directory, f"torch_losses_{rank}.txt"), "w") as f:
        f.write("\n".join(f"{v:.9g}" for v in losses) + "\n")
    state = sum(s["exp_avg"].numel() for s in optimizer.state.values())
    with open(os.path.join(directory, f"torch_state_{rank}.txt"), "w") as f:
        f.write(f"{state}\n")
    with FSDP.summon_full_params(model, writeback=False):
        if rank == 0:
            weights = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
            weights.numpy().astype(np.float32).tofile(os.path.join(directory, "torch_weights.bin"))
    # Tearing Gloo down sometimes aborts the process ("terminate called without an active exception"),
    # after a barrier too, more often under FULL_SHARD: once every rank has written its files, leave
    # without tearing anything down (the reference's teardown is not what this test checks).
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(command, env):
    # start_new_session + killpg: on a timeout, torchrun's ranks go too.
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        output, _ = process.communicate()
        print("timed out after 240 s:", " ".join(command), "\n", output[-4000:])
        sys.exit(1)
    if process.returncode != 0:
        print("command failed:", " ".join(command), "\n", output[-4000:])
        sys.exit(1)


def main(acc_binary, strategy):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    for name in [n for n in env if n.startswith(("FSDP_", "ACCELERATE_"))]:
        env.pop(name)
    with tempfile.TemporaryDirectory() as directory:
        count = write_inputs(directory)
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(WORLD),
                    "--master_addr", "127.0.0.1"]
        run(torchrun + ["--master_port", str(free_port()), os.path.abspath(__file__), "--torch-worker",
                        directory, strategy], env)
        acc_env = dict(env, ACCELERATE_USE_FSDP="true", FSDP_SHARDING_STRATEGY=strategy)
        run(torchrun + ["--master_port", str(free_port()), "--no-python", acc_binary, directory, str(BATCH)],
            acc_env)

        def read(name):
            return np.loadtxt(os.path.join(directory, name), ndmin=1)

        def weights(tag):
            return np.fromfile(os.path.join(directory, f"{tag}_weights.bin"), dtype=np.float32)

        ok = True
        for rank in range(WORLD):
            ok &= close(f"per-step losses rank {rank}, acc vs torch FSDP {strategy}", read(f"acc_losses_{rank}.txt"),
                        read(f"torch_losses_{rank}.txt"))
        ok &= close("final weights, acc vs torch FSDP", weights("acc"), weights("torch"))
        initial = np.fromfile(os.path.join(directory, "init.bin"), dtype=np.float32)
        moved = float(np.max(np.abs(weights("torch") - initial)))
        print(f"largest change of a weight over training: {moved:.3g}")
        ok &= moved > 100 * TOLERANCE
        # Sharded, not replicated: each rank's Adam state covers at most its padded shard.
        shard = math.ceil(count / WORLD)
        for side in ("acc", "torch"):
            held = [int(read(f"{side}_state_{rank}.txt")[0]) for rank in range(WORLD)]
            print(f"{side}: Adam state elements per rank {held} of {count} (shard {shard})")
            ok &= all(0 < h <= shard for h in held)
        return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--torch-worker":
        torch_worker(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 2:
        sys.exit(main(sys.argv[1], "SHARD_GRAD_OP"))
    elif len(sys.argv) == 4 and sys.argv[2] == "--strategy" and sys.argv[3] in ("SHARD_GRAD_OP", "FULL_SHARD"):
        sys.exit(main(sys.argv[1], sys.argv[3]))
    else:
        sys.exit(__doc__)
