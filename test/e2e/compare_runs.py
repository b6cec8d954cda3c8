"""Runs an example three ways and requires that the migrated program, on one process and on two, prints
and writes what the original single-process program does:

  original program, one process, global batch G                       (the reference)
  migrated program, one process, batch G                              == the reference
  migrated program under acc-launch --cpu -n 2, batch P per process   == the reference, from rank 0 alone

Printed lines: every line the reference prints, the migrated program prints once (rank 0; rank 1 prints
nothing), with the same words and the same numbers within a relative tolerance (DDP adds the same
gradients in another order, and a loss reduced over processes is a mean of means). With a prepared
loader each rank trains on half of every global batch (P = G/2) and DDP averages the gradients.

Written files (each run in a directory of its own): the two migrated runs write the same files with the
same contents (text: line by line as above; .safetensors: read with Python's safetensors; torch::save
archives: read with torch.jit.load; anything else byte for byte), and every file the reference writes
that the migrated program writes under the same name and kind is equal to it too. A file written by
every rank shows up as repeated lines or a torn file.

Usage: compare_runs.py <acc-launch> <original> <migrated> <G> <P> [--data DIR]
  --data: files the programs read, copied into each run's directory first.
Every run must exit 0; each has a time limit.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOLERANCE = 1e-4
NUMBER = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                    "GROUP_RANK", "ACC_JOB_ID")


def close(a, b):
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a))


def lines_differ(want, got):
    """The first difference between two printed texts (fields split on spaces, tabs and commas), or None."""
    want_lines, got_lines = want.splitlines(), got.splitlines()
    for number, (w, g) in enumerate(zip(want_lines, got_lines), 1):
        wf, gf = re.split(r"[ \t,]+", w.strip()), re.split(r"[ \t,]+", g.strip())
        if len(wf) != len(gf):
            return f"line {number}: want {w!r}, got {g!r}"
        for a, b in zip(wf, gf):
            if NUMBER.match(a) and NUMBER.match(b):
                if not close(float(a), float(b)):
                    return f"line {number}: want {a} (in {w!r}), got {b} (in {g!r})"
            elif a != b:
                return f"line {number}: want {w!r}, got {g!r}"
    if len(want_lines) != len(got_lines):
        return f"{len(got_lines)} lines, want {len(want_lines)}"
    return None


def tensors_of(path):
    """The named tensors of a weights file, as numpy arrays, read with Python's own tools."""
    if path.endswith(".safetensors"):
        from safetensors.numpy import load_file
        return load_file(path)
    import torch
    module = torch.jit.load(path, map_location="cpu")
    return {name: value.detach().numpy() for name, value in module.state_dict().items()}


def files_differ(want_path, got_path):
    if os.path.isdir(want_path) != os.path.isdir(got_path):
        return "one is a directory, the other a file"
    if os.path.isdir(want_path):
        return trees_differ(want_path, got_path)
    with open(want_path, "rb") as f:
        want = f.read()
    with open(got_path, "rb") as f:
        got = f.read()
    if want == got:
        return None
    if want_path.endswith((".safetensors", ".pt", ".pth")):
        import numpy
        a, b = tensors_of(want_path), tensors_of(got_path)
        if sorted(a) != sorted(b):
            return f"tensors {sorted(a)} != {sorted(b)}"
        for name in a:
            if a[name].shape != b[name].shape:
                return f"tensor {name}: shape {a[name].shape} != {b[name].shape}"
            if not numpy.allclose(a[name], b[name], rtol=TOLERANCE, atol=TOLERANCE):
                return f"tensor {name}: values differ by up to {numpy.abs(a[name] - b[name]).max()}"
        return None
    try:
        return lines_differ(want.decode(), got.decode())
    except UnicodeDecodeError:
        return "binary contents differ"


def listing(root):
    found = set()
    for directory, _, files in os.walk(root):
        for name in files:
            found.add(os.path.relpath(os.path.join(directory, name), root))
    return found


def trees_differ(want_root, got_root):
    want, got = listing(want_root), listing(got_root)
    if want != got:
        return f"files {sorted(want)} != {sorted(got)}"
    for name in sorted(want):
        problem = files_differ(os.path.join(want_root, name), os.path.join(got_root, name))
        if problem:
            return f"{name}: {problem}"
    return None


def run(command, directory, env, limit):
    done = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=limit)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} exited {done.returncode}\n--- stdout\n{done.stdout}\n"
                 f"--- stderr\n{done.stderr}")
    return done.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("launch")
    parser.add_argument("original")
    parser.add_argument("migrated")
    parser.add_argument("global_batch")
    parser.add_argument("process_batch")
    parser.add_argument("--data")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="acc-e2e-")
    try:
        dirs = {}
        for name in ("original", "migrated1", "migrated2"):
            dirs[name] = os.path.join(work, name)
            if args.data:
                shutil.copytree(args.data, dirs[name])
            else:
                os.makedirs(dirs[name])
        before = {name: listing(path) for name, path in dirs.items()}
        single = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
        original = run([args.original, args.global_batch], dirs["original"], single, 120)
        migrated1 = run([args.migrated, args.global_batch], dirs["migrated1"], single, 120)
        launched = run([args.launch, "--cpu", "-n", "2", "--main_process_port", "0", args.migrated,
                        args.process_batch], dirs["migrated2"], single, 180)
        ranks = {0: [], 1: []}
        for line in launched.splitlines():
            match = re.match(r"^\[rank(\d+)\]: ?(.*)$", line)
            if match:
                ranks[int(match.group(1))].append(match.group(2))
        if "loss" not in original:
            sys.exit(f"FAIL: the original printed no loss:\n{original}")

        failures = []
        for what, got in (("the migrated program on 1 process (batch %s)" % args.global_batch, migrated1),
                          ("rank 0 of the migrated program on 2 processes (batch %s each)" % args.process_batch,
                           "\n".join(ranks[0]) + "\n")):
            problem = lines_differ(original, got)
            if problem:
                failures.append(f"{what} prints other lines than the original: {problem}\n--- original\n{original}"
                                f"--- {what}\n{got}")
        if ranks[1]:
            failures.append("rank 1 printed lines (each line should be printed once, by rank 0):\n" +
                            "\n".join(ranks[1]))

        written = {name: sorted(listing(path) - before[name]) for name, path in dirs.items()}
        problem = trees_differ(dirs["migrated1"], dirs["migrated2"])
        if problem:
            failures.append(f"the files written on 2 processes differ from those written on 1: {problem}")
        compared = []
        for name in written["original"]:
            reference, migrated = os.path.join(dirs["original"], name), os.path.join(dirs["migrated1"], name)
            if os.path.exists(migrated) and os.path.isdir(migrated) != os.path.isdir(reference):
                compared.append(f"{name} (now a directory: saved with accelerator.save_model)")
            elif os.path.exists(migrated):
                problem = files_differ(reference, migrated)
                if problem:
                    failures.append(f"{name}: the migrated program writes other contents than the original: {problem}")
                compared.append(name)
        if failures:
            sys.exit("FAIL:\n" + "\n".join(failures))
        print(f"e2e: {len(original.splitlines())} lines agree: original (batch {args.global_batch}), migrated on 1 "
              f"process (batch {args.global_batch}), rank 0 of the migrated program on 2 processes (batch "
              f"{args.process_batch} each); rank 1 printed nothing; files written on 1 and 2 processes agree "
              f"({', '.join(written['migrated1']) or 'none'}); equal to the original's: {', '.join(compared) or 'none'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
