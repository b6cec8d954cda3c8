#!/usr/bin/env python3
"""Compares two weight files of acc_cluster_trainer (text, one number per line).

    same_weights.py A B [--rtol 1e-4] [--atol 1e-6]

Exit status: 0 when both files hold the same count of numbers and every pair agrees within
|a - b| <= atol + rtol * max(|a|, |b|); 1 otherwise, naming the first index that differs (or the two
lengths), and also when a file cannot be read or holds something that is not a number. Python stdlib only.
"""
import argparse
import math
import sys


def read(path):
    values = []
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                text = line.strip()
                if not text:
                    continue
                try:
                    values.append(float(text))
                except ValueError:
                    print(f"same_weights: {path}:{lineno}: not a number: {text!r}", file=sys.stderr)
                    sys.exit(1)
    except OSError as e:
        print(f"same_weights: cannot read {path}: {e.strerror}", file=sys.stderr)
        sys.exit(1)
    return values


def main():
    parser = argparse.ArgumentParser(description="Compare two weight files within a tolerance.")
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    a, b = read(args.a), read(args.b)
    if not a:
        print(f"same_weights: {args.a} holds no number")
        return 1
    if len(a) != len(b):
        print(f"same_weights: different lengths: {args.a} has {len(a)} numbers, {args.b} has {len(b)}")
        return 1
    worst = 0.0
    for i, (x, y) in enumerate(zip(a, b)):
        if math.isnan(x) or math.isnan(y) or abs(x - y) > args.atol + args.rtol * max(abs(x), abs(y)):
            print(f"same_weights: index {i} (line {i + 1}) differs: {x!r} vs {y!r} "
                  f"(rtol {args.rtol}, atol {args.atol})")
            return 1
        worst = max(worst, abs(x - y))
    print(f"same_weights: {len(a)} numbers agree (largest difference {worst:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
