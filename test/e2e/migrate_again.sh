#!/usr/bin/env bash
# acc-migrate on its own output edits nothing (idempotence), with the build's flags.
# Usage: migrate_again.sh <acc-migrate> <build dir> <migrated source>...
set -euo pipefail
tool=$1 build=$2
shift 2
err=$(mktemp)
trap 'rm -f "$err"' EXIT
diff=$("$tool" --color=false -p "$build" "$@" 2> "$err") || { cat "$err"; exit 1; }
if [ -n "$diff" ]; then
  echo "FAIL: migrating the migrated programs again changed them:"; echo "$diff"; exit 1
fi
grep -q "0 file(s) changed" "$err" || { cat "$err"; exit 1; }
echo "migrated programs are a fixed point of acc-migrate"
