"""Python Accelerate's side of acc_bench_big_model_load (big_model_load.cpp starts this script in a
fresh process per measured run). The same model as the C++ side, with the same names, so that both
read the same safetensors checkpoint: a Sequential whose one child "layers" is a Sequential of
LAYERS Linear(WIDTH, WIDTH) ("layers.0.weight", "layers.0.bias", ...).

MAP is the device map of the whole model:
  cpu         load_checkpoint_and_dispatch(device_map={"": "cpu"})
  disk        load_checkpoint_and_dispatch(device_map={"": "disk"} + an inert entry,
              offload_folder=OFFLOAD_DIR): load_checkpoint_in_model reads every weight and writes it
              again to OFFLOAD_DIR as a numpy .dat file (it never points at the checkpoint's own
              files), and the forward reads those. The inert entry ("unused": "cpu", a name that is
              no module) is needed because accelerate 1.15's load_state_dict loads a map with a single
              device straight onto that device, and {"": "disk"} alone fails there with
              "SafetensorError: device disk is invalid"; it covers no weight and changes nothing else.
  disk-index  dispatch_model(device_map={"": "disk"}, offload_index=...) with an index whose
              entries name the checkpoint's safetensors files (what transformers' from_pretrained
              does): nothing is copied, weights are read from the checkpoint around each forward

Prints
  RESULT <load ms> <first forward ms> <peak RSS MiB> <RSS after imports MiB> <output sum>
load = empty construction + loading/dispatch; first forward = one forward of a BATCH x WIDTH input;
peak RSS = VmHWM of this process at the end.

usage: big_model_load.py MAP CHECKPOINT_DIR WIDTH LAYERS BATCH [OFFLOAD_DIR]"""
import json
import os
import sys
import time
from collections import OrderedDict

import torch
from accelerate import dispatch_model, init_empty_weights, load_checkpoint_and_dispatch


def status_mib(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def make_model(width, layers):
    return torch.nn.Sequential(
        OrderedDict(layers=torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])))


def main(argv):
    if len(argv) < 5 or argv[0] not in ("cpu", "disk", "disk-index"):
        sys.exit(__doc__.split("\n\n")[-1])
    device_map, checkpoint = argv[0], argv[1]
    width, layers, batch = (int(v) for v in argv[2:5])
    offload_dir = argv[5] if len(argv) > 5 else None
    if device_map == "disk" and offload_dir is None:
        sys.exit("big_model_load.py: disk needs OFFLOAD_DIR")
    base_rss = status_mib("VmRSS")

    start = time.perf_counter()
    with init_empty_weights():
        model = make_model(width, layers)
    model.eval()
    if device_map == "disk-index":
        index_file = os.path.join(checkpoint, "model.safetensors.index.json")
        if os.path.exists(index_file):
            with open(index_file) as f:
                weight_map = json.load(f)["weight_map"]
        else:  # one unsharded file
            weight_map = {name: "model.safetensors" for name in model.state_dict()}
        index = {name: {"safetensors_file": os.path.join(checkpoint, file), "weight_name": name}
                 for name, file in weight_map.items()}
        model = dispatch_model(model, device_map={"": "disk"}, main_device="cpu", offload_index=index)
    elif device_map == "disk":
        model = load_checkpoint_and_dispatch(model, checkpoint, device_map={"": "disk", "unused": "cpu"},
                                             offload_folder=offload_dir)
    else:
        model = load_checkpoint_and_dispatch(model, checkpoint, device_map={"": "cpu"})
    load_ms = (time.perf_counter() - start) * 1000

    x = torch.linspace(-1, 1, batch * width).reshape(batch, width)
    with torch.no_grad():
        start = time.perf_counter()
        y = model(x)
        forward_ms = (time.perf_counter() - start) * 1000
    print(f"RESULT {load_ms:.1f} {forward_ms:.1f} {status_mib('VmHWM'):.1f} {base_rss:.1f} "
          f"{y.double().sum().item():.9g}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
