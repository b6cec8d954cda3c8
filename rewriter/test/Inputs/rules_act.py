"""Every rule acts on the real-torch programs that docs/migrate.md says it acts on.

Reads the table of docs/migrate.md's section "Where each rule acts" (| rule | run as | acts on |), runs
each row's rule with the row's arguments (`--rules=` naming the rule with the rules producing the facts
it consumes, as its lit test runs it) over the programs holding the named files, with --report=<json>,
and requires, reading the report, that the rule made at least one edit or finding in each named file
and that every source parsed. Every rule and finalizer of `acc-migrate --list-rules` must have a row
naming at least one file: a new rule cannot be added without saying where it acts.

Usage: rules_act.py "<acc-migrate command>" <repository root> <work dir> [-- <compiler arguments>]
(the compiler arguments go to every run, after `--`).
"""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

# (rule, file) pairs known to fail because the rule's owner has not fixed it yet, with that owner. An
# expected failure that passes fails the test: remove its mark then.
EXPECTED_FAILURES = {}

SECTION = "### Where each rule acts"
# Folders whose entries are whole programs: a file directly inside is one program, a folder is one
# (its files are migrated together, as a multi-file program is).
PROGRAM_FOLDERS = ("examples/programs", "examples/projects", "rewriter/test/Inputs/programs")


def listed_rules(tool):
    """The rules and finalizers that `acc-migrate --list-rules` prints, in its order."""
    out = subprocess.run(tool + ["--list-rules"], check=True, capture_output=True, text=True).stdout
    rules, finalizers, in_finalizers = [], [], False
    for line in out.splitlines():
        if line.startswith("finalizers"):
            in_finalizers = True
            continue
        name = line.split()[0] if line.strip() else ""
        if name:
            (finalizers if in_finalizers else rules).append(name)
    return rules, finalizers


def table_rows(doc):
    """{rule: (args, [files])} from the section's table; cells hold `backticked` values."""
    text = open(doc).read()
    start = text.find(SECTION)
    if start < 0:
        sys.exit("FAIL: %s has no section '%s'" % (doc, SECTION))
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) != 3 or cells[0] in ("rule", "") or set(cells[0]) <= set("-: "):
            continue
        rule = cells[0].strip("`")
        if rule in rows:
            sys.exit("FAIL: %s: two rows for %s" % (doc, rule))
        rows[rule] = (" ".join(re.findall(r"`([^`]*)`", cells[1])), re.findall(r"`([^`]*)`", cells[2]))
    return rows


def program_of(repo, path):
    """The program holding `path` (relative to the repository): the file or folder directly inside a
    programs folder."""
    for folder in PROGRAM_FOLDERS:
        if path.startswith(folder + "/"):
            return os.path.join(repo, folder, path[len(folder) + 1:].split("/")[0])
    return None


def run_group(tool, compiler, repo, work, key, rows):
    """Runs `args` (key: (args, where)) once over the programs of `rows` ([(rule, files)]); returns
    (failures, expected failures seen, unexpected passes), each a list of text."""
    args = key[0]
    report = os.path.join(work, "report-%d.json" % abs(hash(key)))
    programs = sorted({program_of(repo, f) for _, files in rows for f in files})
    command = tool + shlex.split(args) + ["--report=" + report] + programs + (["--"] + compiler if compiler else [])
    run = subprocess.run(command, capture_output=True, text=True, cwd=work)
    if run.returncode not in (0, 1) or not os.path.exists(report):
        return ["`%s` exited %d:\n%s" % (" ".join(command), run.returncode, run.stderr)], [], []
    data = json.load(open(report))
    failures, expected, unexpected = [], [], []
    for unit in data["units"]:
        if unit["status"] != "parsed":
            failures.append("`acc-migrate %s`: %s did not parse: %s" % (args, unit["path"], unit.get("diagnostic", "")))
    where = lambda p: os.path.realpath(os.path.join(work, p))
    for rule, files in rows:
        acted = {where(c["path"]) for c in data["changes"] for e in c["edits"] if e["rule"] == rule}
        acted |= {where(f["path"]) for f in data["findings"] if f["rule"] == rule}
        for f in files:
            did = os.path.realpath(os.path.join(repo, f)) in acted
            owner = EXPECTED_FAILURES.get((rule, f))
            if owner and did:
                unexpected.append("%s now acts on %s: remove its expected failure (%s)" % (rule, f, owner))
            elif owner:
                expected.append("%s on %s (expected to fail until fixed: %s)" % (rule, f, owner))
            elif not did:
                failures.append("%s made no edit and no finding in %s (`acc-migrate %s` over %s)"
                                % (rule, f, args, ", ".join(os.path.relpath(p, repo) for p in programs)))
    return failures, expected, unexpected


def main():
    tool, repo, work = shlex.split(sys.argv[1]), os.path.realpath(sys.argv[2]), sys.argv[3]
    compiler = sys.argv[5:] if len(sys.argv) > 4 and sys.argv[4] == "--" else []
    os.makedirs(work, exist_ok=True)
    doc = os.path.join(repo, "docs", "migrate.md")
    rules, finalizers = listed_rules(tool)
    rows = table_rows(doc)
    failures = []
    for name in rules + finalizers:
        if name not in rows:
            failures.append("%s (of --list-rules) has no row in %s's '%s'" % (name, doc, SECTION))
        elif not rows[name][1]:
            failures.append("%s's row names no program it acts on" % name)
    for name, (args, files) in rows.items():
        if name not in rules + finalizers:
            failures.append("the row %s names no rule of --list-rules" % name)
        elif name in rules and name not in args:
            failures.append("%s's row runs `%s`, which does not select it" % (name, args))
        for f in files:
            if not program_of(repo, f) or not os.path.exists(os.path.join(repo, f)):
                failures.append("%s's row names %s, not a file of a program under %s" % (name, f, ", ".join(PROGRAM_FOLDERS)))
    runnable = {n: r for n, r in rows.items() if n in rules + finalizers and r[1] and
                all(program_of(repo, f) and os.path.exists(os.path.join(repo, f)) for f in r[1])}
    # Rows run the same way share one run (finalizers run as the rule that feeds them); the runs that
    # configure a CMake project (examples/projects: the temporary configure takes most of the time)
    # start first, so that the other worker takes the rest meanwhile.
    # One run per folder of programs: acc-migrate finds the flags from its first input (a CMake project
    # of examples/projects is configured), so a project is run alone, as its user would run it.
    groups = {}
    for name, (args, files) in sorted(runnable.items()):
        by_place = {}
        for f in files:
            program = program_of(repo, f)
            place = program if "/examples/projects/" in program else os.path.dirname(program)
            by_place.setdefault(place, []).append(f)
        for place, placed in by_place.items():
            groups.setdefault((args, place), []).append((name, placed))
    slow = lambda item: ("/examples/projects/" not in item[0][1], item[0])
    expected, unexpected = [], []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda item: run_group(tool, compiler, repo, work, *item), sorted(groups.items(), key=slow))
        for f, e, u in results:
            failures += f
            expected += e
            unexpected += u
    for line in expected:
        print("XFAIL: " + line)
    for line in unexpected + failures:
        print("FAIL: " + line)
    files = sum(len(r[1]) for r in runnable.values())
    print("%d rule(s), %d (rule, file) pair(s): %d failed, %d expected to fail, %d unexpectedly passed"
          % (len(runnable), files, len(failures), len(expected), len(unexpected)))
    sys.exit(1 if failures or unexpected else 0)


if __name__ == "__main__":
    main()
