"""Runs the documentation: `check_docs.py cpp|shell|selftest --source DIR --work DIR ...`.

cpp:      compiles every C++ block of README.md and docs/*.md, runs the complete programs (cpp_blocks.py)
shell:    checks every command that starts an acc tool, torchrun or accelerate launch (shell_blocks.py)
selftest: runs both over fixtures/*.md, whose annotated blocks hold known mistakes: each must fail with
          its expected message at its own line, and nothing else may fail.
Every failure is printed as `FAIL <file>:<line>: <what is wrong>`; the exit status is 1 if any.
"""
import argparse
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpp_blocks import CPP_LANGS, CppBlocks  # noqa: E402
from markdown_blocks import blocks, inline_spans  # noqa: E402
from shell_blocks import SHELL_LANGS, ShellChecks, block_commands, inline_commands  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                    "ACC_CONFIG_FILE", "ACCELERATE_USE_CPU", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                    "SLURM_PROCID", "SLURM_NTASKS", "TORCHELASTIC_RUN_ID")


def log(message):
    print(message, flush=True)


def markdown_files(root, fixtures=None):
    """(path relative to root, text) of README.md and docs/*.md, or of the fixtures."""
    if fixtures:
        names = sorted(glob.glob(os.path.join(fixtures, "*.md")))
        root = os.path.dirname(fixtures)
    else:
        names = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    return root, [(os.path.relpath(n, root), open(n).read()) for n in names]


def scratch_env(work):
    """The environment tools and programs run in: no launch variables of the caller, a scratch HOME
    (no acc or Accelerate default config of the user's is read, nothing is written to theirs)."""
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES and not k.startswith(("PET_", "FSDP_", "ACCELERATE_"))}
    env.update(HOME=home, XDG_CACHE_HOME=os.path.join(home, ".cache"), HF_HOME=os.path.join(home, "hf"),
               ACC_MIGRATE_CACHE=os.path.join(home, "migrate-pch"), OMP_NUM_THREADS="1")
    return env


def run_cpp(args, root, files, work):
    cpp = CppBlocks(root, work, os.path.join(HERE, "preludes"), log)
    for path, text in files:
        for block in blocks(path, text):
            if block.lang in CPP_LANGS:
                cpp.add(block)
    log(f"{len(cpp.program_blocks)} complete programs, "
        f"{sum(len(b) for b in cpp.fragments.values())} fragments in {len(cpp.fragments)} files")
    cwd = os.getcwd()
    os.chdir(root)  # #line names the Markdown files relative to the root, as the messages do
    try:
        cpp.build(args.cmake, os.path.join(HERE, "project"), args.acc_dir, args.cxx, args.launcher)
    finally:
        os.chdir(cwd)
    scratch = tempfile.mkdtemp(dir=work)
    try:
        cpp.run_programs(scratch_env(work), scratch, timeout=120)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    programs = {f"{p}\t{n}": exe for (p, n), exe in cpp.programs.items()}
    with open(os.path.join(work, "doc_programs.json"), "w") as f:
        json.dump(programs, f)
    return [((b.where() if b else "(build)"), m) for b, m in cpp.failures]


def run_shell(args, root, files, work):
    programs = {}
    listing = os.path.join(work, "doc_programs.json")
    if os.path.exists(listing):
        programs = {tuple(k.split("\t")): v for k, v in json.load(open(listing)).items()}
    commands, others = [], []
    for path, text in files:
        for block in blocks(path, text):
            if block.lang in SHELL_LANGS:
                found, rest = block_commands(block)
                commands += found
                others += rest
        commands += inline_commands(path, inline_spans(path, text))
    scratch = tempfile.mkdtemp(dir=work)
    try:
        checks = ShellChecks(root, args.bin, args.python, scratch_env(work), programs, log, scratch)
        checks.check(commands)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for where, line in others:
        log(f"{where}: [not checked: no acc tool, torchrun or accelerate launch] {line}")
    return checks.failures


def report(failures):
    for where, message in failures:
        print(f"FAIL {where}: {message}", flush=True)
    return 1 if failures else 0


def expectations(files):
    """(path, first line, last line, expected text) of the fixtures' `expect=` annotations."""
    out = []
    for path, text in files:
        lines = text.split("\n")
        for block in blocks(path, text):
            if "expect" in block.options:
                out.append((path, block.line, block.line + block.text.count("\n") + 1, block.options["expect"]))
        for number, line in enumerate(lines, 1):
            m = re.match(r'^\s*<!--\s*doc-test:.*expect-inline="([^"]*)".*-->', line)
            if m:
                out.append((path, number + 1, number + 1, m.group(1)))
    return out


def selftest(args):
    root, files = markdown_files(args.source, args.fixtures)
    work = os.path.join(args.work, "selftest")
    os.makedirs(work, exist_ok=True)
    failures = run_cpp(args, root, files, work) + run_shell(args, root, files, work)
    report(failures)
    problems = []
    unmatched = list(failures)
    for path, first, last, text in expectations(files):
        hit = [f for f in unmatched if f[0].startswith(path + ":") and
               first <= int(f[0].rsplit(":", 1)[1]) <= last and text in f[1]]
        if not hit:
            problems.append(f"{path}:{first}: the harness did not report the mistake here (expected a "
                            f"failure at lines {first}-{last} saying '{text}')")
        unmatched = [f for f in unmatched if f not in hit]
    problems += [f"{w}: reported, but no fixture expects it: {m}" for w, m in unmatched]
    for p in problems:
        print(f"SELFTEST FAIL {p}")
    print("selftest: " + ("every known mistake was caught at its line" if not problems else "FAILED"))
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["cpp", "shell", "selftest"])
    parser.add_argument("--source", required=True, help="repository root")
    parser.add_argument("--work", required=True, help="a folder of the build tree kept between runs")
    parser.add_argument("--bin", required=True, help="folder of acc-launch and the other tools")
    parser.add_argument("--python", required=True, help="the venv's python (torchrun, accelerate)")
    parser.add_argument("--cmake")
    parser.add_argument("--acc-dir", help="acc's build tree as a CMake package")
    parser.add_argument("--cxx")
    parser.add_argument("--launcher", default="")
    parser.add_argument("--fixtures")
    args = parser.parse_args()
    started = time.monotonic()
    if args.what == "selftest":
        status = selftest(args)
    else:
        root, files = markdown_files(args.source)
        work = os.path.join(args.work, "docs")
        os.makedirs(work, exist_ok=True)
        run = run_cpp if args.what == "cpp" else run_shell
        status = report(run(args, root, files, work))
    log(f"{args.what}: {time.monotonic() - started:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
