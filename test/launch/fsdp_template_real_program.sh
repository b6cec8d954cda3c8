#!/usr/bin/env bash
# Accelerate's own FSDP template (huggingface/accelerate examples/config_yaml_templates/fsdp.yaml, kept
# verbatim in launcher/test/accelerate_templates) under the real acc-launch with a real acc program,
# acc-selftest, which links libacc: the launcher's tests use a stand-in program, and the refusal
# depends on acc-launch telling that the program links libacc.
#   1. as it is: refused before any rank starts (exit 2, one line naming the line, the key and the fix);
#   2. with the fix the message names (--fsdp_transformer_layer_cls_to_wrap): both ranks run every
#      self-test check under the template's FSDP and bf16, and the ignored key is noted.
# Usage: fsdp_template_real_program.sh ACC_LAUNCH ACC_SELFTEST TEMPLATE
set -u
launch=$1 selftest=$2 template=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$work/out"; echo "--- stderr"; cat "$work/err"; exit 1; }
run() {
  env -u ACC_CONFIG_FILE -u FSDP_TRANSFORMER_CLS_TO_WRAP -u FSDP_AUTO_WRAP_POLICY XDG_CACHE_HOME="$work/cache" \
    CUDA_VISIBLE_DEVICES= timeout -k 5 120 "$launch" --config_file "$template" --main_process_port 0 "$@" \
    "$selftest" >"$work/out" 2>"$work/err"
}

run
status=$?
[ "$status" -eq 2 ] || fail "the template as it is: exit $status, expected 2"
line=$(grep -n 'fsdp_auto_wrap_policy' "$template" | cut -d: -f1)
grep -q "^acc-launch: error: $template:$line: fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP needs the module types to wrap.*none was started)$" "$work/err" ||
  fail "the refusal does not name the template's line $line and the key"
[ "$(wc -l <"$work/err")" -eq 1 ] || fail "the refusal is not one line"
[ ! -s "$work/out" ] || fail "a rank started although the template was refused"

run --fsdp_transformer_layer_cls_to_wrap Block
status=$?
[ "$status" -eq 0 ] || fail "with the fix the message names: exit $status, expected 0"
grep -q '^\[rank0\]: acc-selftest: 2 process(es), FSDP, device cpu$' "$work/out" || fail "not 2 FSDP ranks"
for check in "training equivalence (DDP vs one process)" "bf16 training"; do
  grep -qF "[rank0]: ok: $check" "$work/out" || fail "check '$check' did not pass"
done
grep -q "fsdp_use_orig_params: true is ignored" "$work/err" || fail "the ignored key is not noted"
echo "OK: refused as it is, runs with the named fix"
