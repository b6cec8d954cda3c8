"""Issue 34 item 11: what Python's own tools do with acc's FSDP SHARDED_STATE_DICT checkpoint, and
the way acc points them to. In this run: 2 ranks of acc's FSDP worker train and save_state with
SHARDED_STATE_DICT (and save_model's whole weights at the same step); then

  - torch.distributed.checkpoint's dcp_to_torch_save and `accelerate merge-weights` are run on the
    checkpoint: they fail (acc does not write DCP's .metadata, see docs/checkpointing.md), and the
    checkpoint holds README.txt naming acc-merge-weights;
  - acc-merge-weights merges it, and Python's safetensors.torch.load_file of the result equals,
    tensor for tensor and bit for bit, the whole weights save_model wrote.

usage: sharded_checkpoint_python_tools.py ACC_FSDP_WORKER ACC_MERGE_WEIGHTS
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(program, args, ranks, timeout=240):
    port = str(free_port())
    processes = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS="1")
        processes.append(subprocess.Popen([program] + args, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, start_new_session=True))
    outputs, ok = [], True
    try:
        for process in processes:
            out, _ = process.communicate(timeout=timeout)
            outputs.append(out)
            ok &= process.returncode == 0
    finally:
        for process in processes:  # leave nothing behind, whatever happened
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return ok, "\n".join(outputs)


def check(condition, what):
    print(("ok: " if condition else "FAIL: ") + what, flush=True)
    return bool(condition)


def main(worker, merge_tool):
    import torch
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    ok = True
    with tempfile.TemporaryDirectory() as directory:
        saved, output = run_ranks(worker, ["sharded_save", directory, "SHARD_GRAD_OP"], 2)
        if not saved:
            print(output)
            return 1
        checkpoint = os.path.join(directory, "checkpoint")
        print("checkpoint files:", sorted(os.listdir(checkpoint)))

        try:
            dcp_to_torch_save(checkpoint, os.path.join(directory, "dcp.pt"))
            dcp_error = None
        # DCP's CheckpointException derives from BaseException, not Exception.
        except (Exception, CheckpointException) as error:  # noqa: BLE001 - what DCP raises is what users see
            dcp_error = f"{type(error).__name__}: {error}"
        print("dcp_to_torch_save:", (dcp_error or "").strip().splitlines()[-1:])
        merge = subprocess.run([sys.executable, "-m", "accelerate.commands.accelerate_cli", "merge-weights", checkpoint,
                                os.path.join(directory, "accelerate_merged")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
        print(f"accelerate merge-weights: exit {merge.returncode}: {merge.stdout.strip().splitlines()[-1:]}")
        ok &= check(dcp_error is not None and merge.returncode != 0,
                    "Python's DCP tools cannot read acc's shards (no DCP .metadata)")

        readme = os.path.join(checkpoint, "README.txt")
        text = open(readme).read() if os.path.exists(readme) else ""
        ok &= check("acc-merge-weights <this directory> <output directory>" in text and "dcp_to_torch_save" in text,
                    "the checkpoint's README.txt names acc-merge-weights and the Python tools it replaces")

        merged_dir = os.path.join(directory, "merged")
        merged = subprocess.run([merge_tool, checkpoint, merged_dir], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=240)
        print(merged.stdout, end="")
        ok &= check(merged.returncode == 0, "acc-merge-weights merged the checkpoint")
        if merged.returncode == 0:
            merged_tensors = load_file(os.path.join(merged_dir, "model.safetensors"))
            whole = load_file(os.path.join(directory, "whole", "model.safetensors"))
            same = merged_tensors.keys() == whole.keys() and all(
                torch.equal(merged_tensors[k], whole[k]) for k in whole)
            ok &= check(same, f"Python's load_file of the merged weights equals save_model's ({len(whole)} tensors)")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
