#!/bin/sh
# The bounded fuzz run of ctest (checkpoint.fuzz_safetensors_parsers), in two phases:
#   1. 3/4 of the time over the committed corpus (fuzz/corpus): small inputs, thousands of runs
#      a second, which is where the parser's structure gets explored;
#   2. 1/4 of the time over a large valid file generated here (make_corpus.py --large: 2 MiB of
#      metadata, two tensors; too big to commit), so that inputs of megabytes are exercised: each
#      run of one takes about a second under the sanitizers, which would starve phase 1 if the two
#      shared a corpus.
# -max_len is not given: the fuzzer sets it from acc::safetensors::kMaxHeaderBytes. New inputs go
# to scratch corpora under WORK (the committed corpus is only read); crashes go to ARTIFACTS.
#
#   run_fuzz_test.sh FUZZER PYTHON SECONDS WORK ARTIFACTS
set -eu
fuzzer=$1 python=$2 seconds=$3 work=$4 artifacts=$5
here=$(cd "$(dirname "$0")" && pwd)

rm -rf "$work"
mkdir -p "$work/small" "$work/large" "$artifacts"
"$python" "$here/make_corpus.py" --large "$work/large/large_metadata"

large=$((seconds / 4))
[ "$large" -ge 1 ] || large=1
small=$((seconds - large))
[ "$small" -ge 1 ] || small=1

export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
fuzz() {
  "$fuzzer" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -dict="$here/safetensors.dict" \
            -artifact_prefix="$artifacts/" "$@"
}
echo "fuzz phase 1: ${small} s over the committed corpus"
fuzz -max_total_time="$small" "$work/small" "$here/corpus"
echo "fuzz phase 2: ${large} s over a large valid file ($(wc -c < "$work/large/large_metadata") bytes)"
fuzz -max_total_time="$large" "$work/large"
# Its new inputs are megabytes each (tens of MB in all): kept only when the run failed.
rm -rf "$work/large"
