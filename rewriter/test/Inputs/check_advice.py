"""Runs the advice acc-migrate gives: every `--rules=...` or `--fsdp-units=...` named in its findings and
warnings is run with the same inputs, and must be accepted (exit status not 2) and change what the
run does (another diff), so that no advice names a flag that does nothing.

Usage: check_advice.py <acc-migrate> <input> [--rules=<selection>]...  (one run per selection)
"""
import re
import subprocess
import sys

FLAG = re.compile(r"(--(?:rules|fsdp-units)=[A-Za-z0-9_,+-]+)")


def run(tool, input_file, flags):
    done = subprocess.run([tool, "--color=false", "-j", "1", *flags, input_file], capture_output=True, text=True,
                          timeout=300)
    return done.returncode, done.stdout, done.stderr


def main():
    tool, input_file, selections = sys.argv[1], sys.argv[2], sys.argv[3:]
    checked = 0
    for selection in selections:
        status, diff, err = run(tool, input_file, [selection])
        if status == 2:
            sys.exit(f"{selection}: usage error: {err}")
        for advice in sorted(set(FLAG.findall(err))):
            advice = advice.rstrip(",")
            if advice == selection:  # the warning's own prefix names the selection it is about
                continue
            advice_status, advice_diff, advice_err = run(tool, input_file, [advice])
            if advice_status == 2:
                sys.exit(f"advice {advice} (given for {selection}) is refused:\n{advice_err}")
            if advice_diff == diff:
                sys.exit(f"advice {advice} (given for {selection}) changes nothing:\n{advice_err}")
            print(f"{selection}: advice {advice} runs and changes the diff")
            checked += 1
    if checked == 0:
        sys.exit("no advice naming a flag was found: the test checks nothing")


if __name__ == "__main__":
    main()
