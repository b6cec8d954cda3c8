#!/bin/sh
# Python Accelerate (the reference) loads acc's example configs and the files acc-config writes, so the
# schema cannot drift from Accelerate's. Usage: accelerate_reads_configs.sh PYTHON ACC_CONFIG CONFIGS_DIR
set -eu
python=$1 acc_config=$2 configs=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp" CUDA_VISIBLE_DEVICES=
"$acc_config" default --config_file "$tmp/default.yaml" >/dev/null
printf '2\n1\n127.0.0.2\n29501\nFSDP\nno\n8\n0,1\nFULL_SHARD\nyes\nSIZE_BASED_WRAP\n1000\nFULL_STATE_DICT\nno\nbf16\n' |
  "$acc_config" --config_file "$tmp/asked.yaml" >/dev/null
"$python" - "$tmp/default.yaml" "$tmp/asked.yaml" "$configs"/*.yaml <<'PY'
import sys
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.utils import DistributedType
for path in sys.argv[1:]:
    config = load_config_from_file(path)
    # A bare `NO` would reach Accelerate as the boolean False.
    assert isinstance(config.distributed_type, DistributedType), (path, config.distributed_type)
    assert config.mixed_precision in ("no", "fp16", "bf16", "fp8"), (path, config.mixed_precision)
    print(f"accelerate reads {path}: {config.distributed_type}, {config.num_processes} process(es)")
PY
