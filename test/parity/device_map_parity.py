"""Device maps: acc against Python Accelerate, computed now, in this run.

Builds the models of runtime/test/inference/models.h as torch.nn modules (same class names,
attribute names, registration order and shapes; on the meta device), runs accelerate's infer_auto_device_map,
get_balanced_memory, compute_module_sizes, find_tied_parameters and get_max_memory for each
scenario, runs acc's device_map_parity with the same scenarios, and compares. Exits 1 on any
difference, printing both sides.

Usage: device_map_parity.py <device_map_parity program> [-v]

Integer max_memory keys (GPUs): Accelerate 1.15 accepts them on a machine without GPUs (it logs
"Device N is not available" and keeps them), so torch.cuda is not patched.

The order of tied groups: Accelerate's find_tied_parameters builds them while iterating a set of
names, so their order changes with PYTHONHASHSEED, and with it the order in which
infer_auto_device_map enters tied modules into the map (and which tied module it splits first).
acc takes them in model order; so that both sides are compared on the same choice, the script
wraps find_tied_parameters (as infer_auto_device_map calls it) to return the same groups in model
order. The groups themselves are compared unwrapped (as sets).
"""
import itertools
import json
import logging
import math
import subprocess
import sys
import warnings

import torch
import torch.nn as nn
import accelerate.utils.modeling as accelerate_modeling
from accelerate.utils import (compute_module_sizes, find_tied_parameters, get_balanced_memory, get_max_memory,
                              infer_auto_device_map)


def tied_groups_in_model_order(model, **kwargs):
    """Accelerate's groups, ordered by where each group's first-registered name stands in
    named_parameters() (see the module's docstring)."""
    groups = find_tied_parameters(model, **kwargs)
    position = {name: i for i, (name, _) in enumerate(model.named_parameters())}
    return sorted(groups, key=lambda group: min(position.get(name, len(position)) for name in group))


accelerate_modeling.find_tied_parameters = tied_groups_in_model_order


# ---------------------------------------------------------------------------------------------
# The models of models.h


class Attention(nn.Module):
    def __init__(self, dim, context):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.ones(context, context, dtype=torch.bool).tril())


class MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1 = nn.LayerNorm(c["dim"])
        self.attn = Attention(c["dim"], c["context"])
        self.norm2 = nn.LayerNorm(c["dim"])
        self.mlp = MLP(c["dim"], c["hidden"])


class LmHead(nn.Module):
    def __init__(self, tied_weight):
        super().__init__()
        self.weight = tied_weight
        self.bias = nn.Parameter(torch.zeros(tied_weight.shape[0]))


class TinyLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed = nn.Embedding(c["vocab"], c["dim"])
        self.layers = nn.ModuleList([Block(c) for _ in range(c["layers"])])
        self.norm = nn.LayerNorm(c["dim"])
        self.lm_head = LmHead(self.embed.weight)
        self.register_buffer("position_ids", torch.arange(c["context"], dtype=torch.long))


def make_mlp(c):
    return nn.Sequential(nn.Linear(c["dim"], c["hidden"]), nn.ReLU(), nn.Linear(c["hidden"], c["hidden"]), nn.ReLU(),
                         nn.Linear(c["hidden"], c["vocab"]))


class Stack(nn.Module):
    def __init__(self, c, shared_proj=None):
        super().__init__()
        self.blocks = nn.ModuleList([Block(c) for _ in range(c["layers"])])
        self.proj = shared_proj if shared_proj is not None else nn.Linear(c["dim"], c["dim"])


class Nested(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(c["dim"]))
        self.encoder = Stack(c)
        self.bn = nn.BatchNorm1d(c["dim"])
        self.decoder = Stack(c, self.encoder.proj)  # one module under two names
        self.head = LmHead(self.encoder.blocks[0].attn.q.weight)
        self.register_buffer("steps", torch.zeros(1, dtype=torch.long))


class Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.pre = nn.Linear(c["dim"], c["hidden"])
        self.head = nn.Linear(c["hidden"], c["dim"])


class Echo(nn.Module):
    def __init__(self, c):
        super().__init__()
        body = Body(c)
        self.head = LmHead(body.head.weight)  # registered first: placed first
        self.norm = nn.LayerNorm(c["dim"])
        self.body = body


DEFAULT_CONFIG = {"layers": 4, "dim": 64, "hidden": 256, "vocab": 512, "context": 16}


def build(name, config):
    c = dict(DEFAULT_CONFIG, **config)
    with torch.device("meta"):
        return {"transformer": TinyLM, "mlp": make_mlp, "nested": Nested, "echo": Echo}[name](c)


# ---------------------------------------------------------------------------------------------
# Accelerate's side

DTYPES = {None: None, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float8_e4m3fn": torch.float8_e4m3fn}


def python_memory(spec):
    """The scenario's max_memory as Accelerate takes it: GPU indices as integers."""
    if "max_memory" not in spec:
        return None
    return {int(k) if k.isdigit() else k: v for k, v in spec["max_memory"].items()}


def accelerate_result(spec, clean_result=None):
    model = build(spec["model"], spec.get("config", {}))
    mode = spec.get("mode", "infer")
    dtype = DTYPES[spec.get("dtype")]
    no_split = spec.get("no_split", [])
    max_memory = python_memory(spec)
    if clean_result is None:
        clean_result = spec.get("clean_result", True)
    infer = dict(no_split_module_classes=no_split, dtype=dtype, clean_result=clean_result,
                 offload_buffers=spec.get("offload_buffers", False))
    if mode == "infer":
        return dict(infer_auto_device_map(model, max_memory=max_memory, **infer))
    if mode in ("auto", "balanced", "balanced_low_0", "sequential"):
        # What load_checkpoint_and_dispatch does with a string device_map (accelerate/big_modeling.py).
        if mode != "sequential":
            max_memory = get_balanced_memory(model, max_memory=max_memory, no_split_module_classes=no_split,
                                             dtype=dtype, low_zero=(mode == "balanced_low_0"))
        return dict(infer_auto_device_map(model, max_memory=max_memory, **infer))
    if mode in ("balanced_memory", "balanced_memory_low_0"):
        memory = get_balanced_memory(model, max_memory=max_memory, no_split_module_classes=no_split, dtype=dtype,
                                     low_zero=(mode == "balanced_memory_low_0"))
        return {str(k): v for k, v in memory.items()}
    if mode == "sizes":
        return list(compute_module_sizes(model, dtype=dtype).items())
    if mode == "tied":
        return find_tied_parameters(model)
    if mode == "max_memory":
        return {str(k): v for k, v in get_max_memory(max_memory).items()}
    raise ValueError(mode)


def whole_bytes(value):
    """Accelerate counts a bool element as 1/8 byte (sizes become floats); acc reports whole bytes,
    rounded up."""
    return math.ceil(value) if isinstance(value, float) else value


def module_order_key(cleaned_name, raw_order):
    """Where a cleaned entry's first module stands in the uncleaned map (acc keeps that order;
    Python appends merged entries at the end, after a walk over a set)."""
    for i, name in enumerate(raw_order):
        if cleaned_name == "" or name == cleaned_name or name.startswith(cleaned_name + "."):
            return i
    return len(raw_order)


def compare(spec, ours):
    """None when acc's line `ours` matches Accelerate, else the reason."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = accelerate_result(spec)
    except Exception as error:  # Accelerate fails: acc must fail too
        if isinstance(ours, dict) and set(ours) == {"error"}:
            return None
        return f"Accelerate raised {type(error).__name__}: {error}; acc returned {ours}"
    if isinstance(ours, dict) and set(ours) == {"error"}:
        return f"acc failed ({ours['error']}); Accelerate returned {expected}"
    mode = spec.get("mode", "infer")
    if mode == "sizes":
        expected = [[name, whole_bytes(size)] for name, size in expected]
        got = [[name, size] for name, size in ours.items()]
        return None if got == expected else f"sizes differ:\n  accelerate {expected}\n  acc        {got}"
    if mode == "tied":
        same = sorted(map(tuple, expected)) == sorted(map(tuple, ours))
        return None if same else f"tied groups differ:\n  accelerate {expected}\n  acc        {ours}"
    if mode in ("balanced_memory", "balanced_memory_low_0", "max_memory"):
        expected = {k: whole_bytes(v) for k, v in expected.items()}
        return None if expected == ours else f"max memory differs:\n  accelerate {expected}\n  acc        {ours}"
    # A device map: the same entries; and the order: Accelerate's own when not cleaned, else module order.
    if expected != ours:
        return f"device maps differ:\n  accelerate {json.dumps(expected)}\n  acc        {json.dumps(ours)}"
    if spec.get("clean_result", True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raw = list(accelerate_result(spec, clean_result=False))
        want = sorted(expected, key=lambda name: module_order_key(name, raw))
    else:
        want = list(expected)
    if list(ours) != want:
        return f"entry order differs:\n  expected {want}\n  acc      {list(ours)}"
    return None


# ---------------------------------------------------------------------------------------------
# Scenarios


def total_size(model_name, config):
    return compute_module_sizes(build(model_name, config))[""]


def memory(total, **fractions):
    """max_memory from fractions of the model's float32 size; g0, g1, g2 are GPUs."""
    out = {}
    for key, fraction in fractions.items():
        out[key[1:] if key.startswith("g") else key] = int(fraction * total)
    return out


def scenarios():
    out = []
    no_splits = {"transformer": [[], ["Block"], ["Attention", "MLP"]], "mlp": [[], ["Linear"]],
                 "nested": [[], ["Block"], ["Stack"]], "echo": [[], ["Body"]]}
    configs = {"transformer": [{}, {"context": 5, "layers": 3}], "mlp": [{}], "nested": [{"layers": 2}], "echo": [{}]}
    for model, model_configs in configs.items():
        for config in model_configs:
            total = total_size(model, config)
            limits = [memory(total, cpu=f) for f in (0.05, 0.2, 0.5, 0.8, 1.5)]
            limits.append(memory(total, cpu=0.3, disk=10.0))
            limits += [memory(total, g0=g0, cpu=c) for g0 in (0.1, 0.4, 0.7) for c in (0.2, 0.6)]
            limits += [memory(total, g0=g0, g1=g1, cpu=c) for g0 in (0.02, 0.25) for g1 in (0.3, 0.6)
                       for c in (0.1, 0.5)]
            limits.append(memory(total, g0=0.3, g1=0.0, g2=0.4, cpu=0.2))
            limits.append(memory(total, g0=2.0, cpu=1.0))  # everything on GPU 0
            for max_memory, no_split, dtype in itertools.product(limits, no_splits[model], (None, "bfloat16")):
                base = {"model": model, "config": config, "max_memory": max_memory, "no_split": no_split}
                if dtype:
                    base["dtype"] = dtype
                out.append(base)
                if "disk" not in max_memory and any(k.isdigit() for k in max_memory):
                    for mode in ("auto", "balanced_low_0", "sequential", "balanced_memory",
                                 "balanced_memory_low_0"):
                        out.append(dict(base, mode=mode))
            # Uncleaned maps (Accelerate's own order), offload_buffers, a dtype not smaller than the weights.
            for max_memory in limits[::3]:
                base = {"model": model, "config": config, "max_memory": max_memory}
                out.append(dict(base, clean_result=False))
                out.append(dict(base, clean_result=False, no_split=no_splits[model][-1]))
                out.append(dict(base, offload_buffers=True))
                out.append(dict(base, dtype="float32"))
                out.append(dict(base, dtype="float8_e4m3fn"))
            for dtype in (None, "bfloat16", "float16"):
                out.append({"model": model, "config": config, "mode": "sizes", "dtype": dtype})
            out.append({"model": model, "config": config, "mode": "tied"})
    # Sizes as strings (convert_file_size_to_int).
    for limits in ({"0": "1.5GB", "1": "10GiB", "cpu": "300MB", "disk": "2KiB"}, {"cpu": "0.5MiB"},
                   {"cpu": "7.3GB", "0": "20KB"}, {"1": 1000, "0": 2000, "cpu": 12345}, {"disk": "1GiB", "cpu": "4KiB"}):
        out.append({"model": "mlp", "mode": "max_memory", "max_memory": limits})
    # String limits through a whole map.
    out.append({"model": "transformer", "max_memory": {"0": "300KB", "cpu": "0.5MiB"}, "no_split": ["Block"]})
    # Errors on both sides: balanced_low_0 without a GPU 0 (Accelerate: KeyError).
    out.append({"model": "transformer", "mode": "balanced_low_0", "max_memory": {"1": 100000, "2": 100000, "cpu": 10**6}})
    return out


def main():
    logging.disable(logging.WARNING)  # Accelerate's "Device N is not available", once per scenario
    program = sys.argv[1]
    verbose = "-v" in sys.argv[2:]
    specs = scenarios()
    run = subprocess.run([program] + [json.dumps(s) for s in specs], capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout, run.stderr)
        print(f"FAIL: {program} exited with {run.returncode}")
        return 1
    lines = run.stdout.splitlines()
    if len(lines) != len(specs):
        print(run.stdout, run.stderr)
        print(f"FAIL: {len(specs)} scenarios, {len(lines)} lines of output")
        return 1
    failures = 0
    by_mode = {}
    for spec, line in zip(specs, lines):
        ours = json.loads(line, object_pairs_hook=dict)
        problem = compare(spec, ours)
        mode = spec.get("mode", "infer")
        by_mode.setdefault(mode, [0, 0])[0 if problem is None else 1] += 1
        if problem is not None:
            failures += 1
            print(f"DIFFERENT {json.dumps(spec)}\n  {problem}")
        elif verbose:
            print(f"same {json.dumps(spec)}\n  {line}")
    for mode, (same, different) in sorted(by_mode.items()):
        print(f"{mode}: {same} same, {different} different")
    if failures:
        print(f"FAIL: {failures} of {len(specs)} scenarios differ from Accelerate")
        return 1
    print(f"OK: {len(specs)} scenarios match Accelerate {__import__('accelerate').__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
