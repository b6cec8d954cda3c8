"""SIGKILLs `acc-migrate --in-place` while it rewrites a tree and checks that every file is then
either its original or its complete migrated version (never a mix, never truncated).

Usage: kill_in_place.py "<acc-migrate command>" <work dir>
Kills land at random times and, to hit the write phase itself, as soon as the first file changes.
"""
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time

tool, work = shlex.split(sys.argv[1]), sys.argv[2]
# Each file parses real torch (its PCH loaded: ~0.5 s), so the files are few; large files make the write
# phase long enough to be interrupted.
FILES = 8
PADDING = "".join("// padding line %d: keeps the write phase of this file measurable\n" % i for i in range(3000))
SOURCE = """#include <torch/torch.h>
%s
void train_%d(torch::nn::Linear &model, torch::Tensor data) {
  torch::Device device(torch::kCUDA);
  auto loss = model->forward(data.to(device)).sum();
  loss.backward();
}
"""

shutil.rmtree(work, ignore_errors=True)
original_dir = os.path.join(work, "original")
os.makedirs(original_dir)
names = ["train_%02d.cpp" % i for i in range(FILES)]
for i, name in enumerate(names):
    with open(os.path.join(original_dir, name), "w") as f:
        f.write(SOURCE % (PADDING, i))
original = {n: open(os.path.join(original_dir, n), "rb").read() for n in names}

expected_dir = os.path.join(work, "expected")
subprocess.run(tool + ["--output-dir", expected_dir, original_dir], check=True,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
migrated = {n: open(os.path.join(expected_dir, n), "rb").read() for n in names}
assert all(migrated[n] != original[n] for n in names), "the fixture must change every file"

start = time.monotonic()
subprocess.run(tool + ["--in-place", shutil.copytree(original_dir, os.path.join(work, "timing"))],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
duration = time.monotonic() - start

random.seed(int(os.environ.get("KILL_SEED", "6")))
mixed = 0
trials = 16
for trial in range(trials):
    tree = os.path.join(work, "trial%02d" % trial)
    shutil.copytree(original_dir, tree)
    paths = [os.path.join(tree, n) for n in names]
    before = {p: os.stat(p).st_mtime_ns for p in paths}
    proc = subprocess.Popen(tool + ["--in-place", tree],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if trial % 2 == 0:
        time.sleep(random.uniform(0, duration * 1.1))  # anywhere in the run
    else:  # the moment the first file is replaced: mid-way through the writes
        while proc.poll() is None and all(os.stat(p).st_mtime_ns == before[p] for p in paths):
            pass
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = 0
    for name, p in zip(names, paths):
        text = open(p, "rb").read()
        if text == migrated[name]:
            done += 1
        elif text != original[name]:
            print("FAIL: trial %d: %s is neither the original nor the migrated file (%d bytes)" % (trial, name, len(text)))
            sys.exit(1)
    if 0 < done < FILES:
        mixed += 1
    print("trial %2d: killed with %2d of %d files migrated" % (trial, done, FILES))
print("every file was whole after %d kills (%d mid-way through the writes)" % (trials, mixed))
