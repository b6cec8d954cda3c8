"""Sharding parity: Accelerate's prepare_data_loader (BatchSamplerShard underneath) against acc's
BatchSamplerShard, for every case of the grid, computed now by both.

usage: sharding_parity.py ACC_GRID_BINARY
The binary prints one line per case and rank; this script prints the same lines from Accelerate
(driven with explicit num_processes/process_index, no processes launched) and compares them.
"""
import subprocess
import sys

from accelerate.data_loader import prepare_data_loader
from torch.utils.data import DataLoader


def accelerate_line(processes, n, batch_size, split, even, drop_last, rank):
    head = f"{processes} {n} {batch_size} {int(split)} {int(even)} {int(drop_last)} {rank}:"
    loader = DataLoader(list(range(n)), batch_size=batch_size, shuffle=False, drop_last=drop_last)
    try:
        prepared = prepare_data_loader(loader, num_processes=processes, process_index=rank,
                                       split_batches=split, even_batches=even,
                                       put_on_device=False)
        batches = [b.tolist() for b in prepared]
        length = len(prepared)
    except ValueError:
        return head + " error"
    text = "".join(" [" + ",".join(str(i) for i in b) + "]" for b in batches)
    return f"{head} len={length}{text}"


def main():
    acc_lines = subprocess.run([sys.argv[1]], check=True, capture_output=True,
                               text=True).stdout.splitlines()
    expected = []
    for processes in (1, 2, 3, 4):
        for n in (0, 1, 3, 10, 17, 64, 100):
            for batch_size in (1, 3, 4, 8):
                for split in (False, True):
                    for even in (False, True):
                        for drop_last in (False, True):
                            for rank in range(processes):
                                expected.append(accelerate_line(processes, n, batch_size, split,
                                                                even, drop_last, rank))
    mismatches = [(a, e) for a, e in zip(acc_lines, expected) if a != e]
    if len(acc_lines) != len(expected):
        print(f"acc printed {len(acc_lines)} lines, Accelerate {len(expected)}")
        return 1
    for acc_line, accelerate in mismatches[:20]:
        print(f"acc:        {acc_line}\naccelerate: {accelerate}\n")
    print(f"{len(expected) - len(mismatches)}/{len(expected)} (case, rank) pairs identical "
          f"(processes x dataset size x batch size x split x even x drop_last)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
