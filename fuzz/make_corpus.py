"""Writes the committed seed corpus of the safetensors fuzzer (fuzz/corpus/).

Byte 0 picks the parser (0: safetensors file, 1: index JSON). Seeds: valid files written by
Python safetensors, and one malformed file per validation rule of the parser.
Run with the venv's Python: python fuzz/make_corpus.py

`make_corpus.py --large FILE` writes only a large valid file (2 MiB of __metadata__, two tensors) to
FILE: the fuzz test generates it into a scratch corpus at test time (too big to commit), so that
inputs far larger than the committed seeds are exercised (run_fuzz_test.sh). Any python3 will do.
"""
import json, os, struct, sys

def header(obj, data=b"", raw=None):
    text = raw if raw is not None else json.dumps(obj).encode()
    return struct.pack("<Q", len(text)) + text + data

if len(sys.argv) == 3 and sys.argv[1] == "--large":
    # 2 MiB of metadata in 4 values, few entries: big, yet linear for the header parser (whose cost
    # grows with the square of the number of entries, issue #19). One run takes about a second
    # under the sanitizers, well within the fuzz test's -timeout=10.
    metadata = {"format": "pt"}
    metadata.update({f"blob{i}": "%08d" % i * (1 << 16) for i in range(4)})
    tensors = {"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
               "b": {"dtype": "U8", "shape": [8], "data_offsets": [16, 24]}}
    with open(sys.argv[2], "wb") as f:
        f.write(bytes([0]) + header({"__metadata__": metadata, **tensors}, bytes(range(24))))
    sys.exit(0)

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(here, exist_ok=True)

def put(name, data, kind=0):
    with open(os.path.join(here, name), "wb") as f:
        f.write(bytes([kind]) + data)

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
