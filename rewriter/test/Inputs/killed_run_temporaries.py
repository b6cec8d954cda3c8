"""What a killed acc-migrate leaves, and what the next run removes.

Usage: killed_run_temporaries.py "<acc-migrate command>" <work dir>

1. SIGKILLs `acc-migrate --in-place` between the creation of its temporary beside src/train.cpp and
   the rename over it (the run is stopped the moment the temporary appears, and killed only if the
   file is not replaced yet): a real leftover, named as the killed run named it.
2. Beside it, names that must stay: a temporary of a live writer (another process, running while the
   next run cleans, as a concurrent acc-migrate would be), a fresh one of another machine, a fresh one
   in the older naming (no writer in the name), look-alikes of the pattern, and a link, a directory
   and a FIFO named as a dead writer's temporary; and a dead writer's temporary in a directory that no
   run writes to. (These names follow the format the leftover of step 1 shows.)
3. A dry run, then `--in-place`, then `--output-dir` into a tree holding a dead writer's temporary;
   after each, prints the run's notes and every planted name, "gone" or "kept", for FileCheck.
4. Two runs on one tree at once: one stopped between creating its temporary and the rename while the
   other runs whole; the first, continued, still has its temporary to rename.
Every path is under <work dir>; the live writer and the stopped run end (and are reaped) before the
script exits.
"""
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

tool, work = shlex.split(sys.argv[1]), sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
src = os.path.join(work, "src")
os.makedirs(os.path.join(src, "data"))
# Large enough that writing and fsyncing the temporary takes long enough to be caught.
PADDING = "".join("// padding line %d: keeps the write of this file measurable\n" % i for i in range(20000))
ORIGINAL = "#include <torch/torch.h>\n%s\nvoid train(torch::Tensor loss) {\n  loss.backward();\n}\n" % PADDING
train = os.path.join(src, "train.cpp")
TEMPORARY = re.compile(r"^train\.cpp\.acc-migrate-(?:(?P<host>[A-Za-z0-9-]+)\.(?P<pid>[0-9]+)\.)?[0-9a-f]{16}$")


def leftovers():
    return sorted(n for n in os.listdir(src) if TEMPORARY.match(n))


def wait_stopped(proc):
    """kill(2) only queues SIGSTOP: until /proc says the process is stopped, it may still be running
    on another CPU, and finish its rename after the checks below have seen its temporary."""
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with open("/proc/%d/stat" % proc.pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state in ("T", "t", "Z", "X"):
            return
        time.sleep(0.001)


def stop_in_write(attempts=40):
    """An `--in-place` run of src/train.cpp stopped (SIGSTOP) between creating its temporary and the
    rename, and the temporary's name; (None, None) if no attempt caught one there."""
    for attempt in range(1, attempts + 1):
        with open(train, "w") as f:
            f.write(ORIGINAL)
        for name in leftovers():
            os.unlink(os.path.join(src, name))
        proc = subprocess.Popen(tool + ["--in-place", src], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and not leftovers():
            pass
        if proc.poll() is None:
            proc.send_signal(signal.SIGSTOP)
            wait_stopped(proc)
        left = leftovers()
        if proc.poll() is None and left and open(train).read() == ORIGINAL:
            print("caught at attempt %d" % attempt, file=sys.stderr)
            return proc, left[0]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return None, None


def kill_at_rename():
    """The name of the temporary a run killed before its rename left, or None."""
    proc, left = stop_in_write()
    if proc:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return left


killed = kill_at_rename()
if killed is None:
    print("FAIL: no run was caught between creating its temporary and the rename")
    sys.exit(1)
match = TEMPORARY.match(killed)
print("killed run left: train.cpp.acc-migrate-%s" % ("<host>.<pid>.<16 hex>" if match["pid"] else "<16 hex>"))
# The host as this version writes it (PchCache's rule: characters other than letters, digits and '-' as '-').
host = match["host"] or re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


HEX = "0123456789abcdef"
dead = dead_pid()
writer = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
planted = {
    "killed run's": killed,
    "dead writer's, of the backup": "train.cpp.orig.acc-migrate-%s.%d.%s" % (host, dead, HEX),
    "live writer's": "train.cpp.acc-migrate-%s.%d.%s" % (host, writer.pid, HEX),
    "another machine's, fresh": "train.cpp.acc-migrate-other-host.%d.%s" % (dead, HEX),
    "older naming, fresh": "train.cpp.acc-migrate-%s" % HEX,
    "15 hex digits": "train.cpp.acc-migrate-%s.%d.%s" % (host, dead, HEX[:15]),
    "upper-case hex": "train.cpp.acc-migrate-%s.%d.%s" % (host, dead, HEX.upper()),
    "a suffix after": "train.cpp.acc-migrate-%s.%d.%s.bak" % (host, dead, HEX),
    "no file name": ".acc-migrate-%s.%d.%s" % (host, dead, HEX),
}
specials = {
    "a link": "link.cpp.acc-migrate-%s.%d.%s" % (host, dead, HEX),
    "a directory": "dir.acc-migrate-%s.%d.%s" % (host, dead, HEX),
    "a FIFO": "fifo.acc-migrate-%s.%d.%s" % (host, dead, HEX),
}
unwritten = "data/table.csv.acc-migrate-%s.%d.%s" % (host, dead, HEX)  # data/ has no source
for name in planted.values():
    if name != killed:
        open(os.path.join(src, name), "w").close()
victim = os.path.join(work, "victim")
with open(victim, "w") as f:
    f.write("the victim keeps its bytes\n")
os.symlink(victim, os.path.join(src, specials["a link"]))
os.mkdir(os.path.join(src, specials["a directory"]))
os.mkfifo(os.path.join(src, specials["a FIFO"]))
open(os.path.join(src, unwritten), "w").close()
everything = dict(planted, **specials, **{"in a directory no run writes to": unwritten})


def run(*args):
    result = subprocess.run(tool + list(args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            timeout=120, cwd=work)
    for line in result.stderr.splitlines():
        if "acc-migrate: note: removed" in line or result.returncode:
            print("stderr: " + line.replace(killed, "<killed run's>"))
    return result.returncode


try:
    for mode in ([], ["--in-place", "--backup-suffix=.orig"]):
        print("run %s: exit %d" % (" ".join(mode) or "(dry run)", run(*(mode + [src]))))
        for what, name in everything.items():
            print("  %s: %s" % ("kept" if os.path.lexists(os.path.join(src, name)) else "gone", what))
finally:
    writer.stdin.close()
    writer.wait()
print("the link's target: " + open(victim).read().strip())

# --output-dir: the directories it writes to are the copies', under the output tree.
out = os.path.join(work, "out")
os.makedirs(out)
in_out = "train.cpp.acc-migrate-%s.%d.%s" % (host, dead, HEX)
open(os.path.join(out, in_out), "w").close()
print("run --output-dir: exit %d" % run("--output-dir", out, src))
print("  %s: dead writer's, in the output tree" % ("kept" if os.path.lexists(os.path.join(out, in_out)) else "gone"))
# The temporaries that stay in src/ (the live writer's, the fresh ones) are partial files, not the
# project's: not copied. The look-alikes are the project's.
for what in ("live writer's", "another machine's, fresh", "older naming, fresh", "15 hex digits", "a suffix after"):
    print("  %s: %s" % ("copied" if os.path.lexists(os.path.join(out, planted[what])) else "not copied", what))

# Two runs at once: the second must leave the first's temporary for it to rename.
shutil.rmtree(out)
first, temporary = stop_in_write()
if first is None:
    print("FAIL: no run was caught between creating its temporary and the rename")
    sys.exit(1)
try:
    print("concurrent run: exit %d" % run("--in-place", src))
    print("  %s: the stopped run's temporary" % ("kept" if os.path.lexists(os.path.join(src, temporary)) else "gone"))
finally:
    first.send_signal(signal.SIGCONT)
    try:
        first.wait(timeout=60)
    except subprocess.TimeoutExpired:
        first.kill()
        first.wait()
print("stopped run, continued: exit %d" % first.returncode)
print("  temporaries of either left: %s" % (", ".join(leftovers()) or "none"))
