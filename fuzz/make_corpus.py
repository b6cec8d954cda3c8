"""Writes the committed seed corpus of the safetensors fuzzer (fuzz/corpus/).

Byte 0 picks the parser (0: safetensors file, 1: index JSON). Seeds: valid files written by
Python safetensors, and one malformed file per validation rule of the parser.
Run with the venv's Python: python fuzz/make_corpus.py
"""
import json, os, struct, sys

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(here, exist_ok=True)

def put(name, data, kind=0):
    with open(os.path.join(here, name), "wb") as f:
        f.write(bytes([kind]) + data)

def header(obj, data=b"", raw=None):
    text = raw if raw is not None else json.dumps(obj).encode()
    return struct.pack("<Q", len(text)) + text + data

try:
    import torch
    from safetensors.torch import save
    put("valid_python_mixed", save({"a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                                    "b": torch.tensor([True, False]), "c": torch.zeros(0, 2),
                                    "d": torch.arange(3).bfloat16(), "s": torch.tensor(1.0)},
                                   metadata={"format": "pt"}))
    put("valid_python_empty", save({}))
except ImportError:
    print("torch/safetensors not found: only hand-made seeds", file=sys.stderr)

ok = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
put("valid_minimal", header(ok, b"\0" * 8))
put("short", b"abc")
put("huge_length", struct.pack("<Q", 2**62))
put("length_past_end", header(ok)[:20])
put("bad_json", header(None, raw=b'{"a":'))
put("not_object", header([1, 2]))
put("unknown_dtype", header({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8))
put("size_mismatch", header({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8))
put("negative_dim", header({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8))
put("overflow", header({"a": {"dtype": "F64", "shape": [2**32, 2**32, 2**32], "data_offsets": [0, 8]}}))
put("overlap", header({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12))
put("gap", header({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12))
put("trailing", header(ok, b"\0" * 12))
put("duplicate_key", header(None, b"\0" * 8, raw=b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                                 b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'))
put("metadata_not_string", header({"__metadata__": {"k": 1}}))
put("deep_nesting", header(None, raw=b"[" * 5000 + b"]" * 5000))
put("bad_utf8", header(None, raw=b'{"\xff":1}'))
put("index_valid", json.dumps({"metadata": {"total_size": 8},
                               "weight_map": {"a": "model-00001-of-00002.safetensors"}}).encode(), 1)
put("index_escape", json.dumps({"weight_map": {"a": "../../etc/passwd"}}).encode(), 1)
put("index_bad_total", json.dumps({"metadata": {"total_size": -1}, "weight_map": {}}).encode(), 1)
