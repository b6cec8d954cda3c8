"""Writes a checkpoint the way Python does (huggingface_hub's sharded safetensors layout with its
index), from the tensors of a safetensors file: the dispatch test's "saved by Python" checkpoint.

usage: reshard_hf.py SOURCE.safetensors DIRECTORY MAX_SHARD_SIZE
"""
import os
import sys

from huggingface_hub import save_torch_state_dict
from safetensors.torch import load_file


def main():
    source, directory, max_shard_size = sys.argv[1:4]
    state = load_file(source)
    os.makedirs(directory, exist_ok=True)
    save_torch_state_dict(state, directory, max_shard_size=max_shard_size)


if __name__ == "__main__":
    main()
