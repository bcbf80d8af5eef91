#!/usr/bin/env bash
# The gate (`npm run lint`, and the first step of `npm test`): formatting and lint (Biome), the
# type check (tsc) and unused files, exports and dependencies (knip). Every step runs; each one
# that fails is named on a line "gate: <step> FAILED". `npm run fix` applies the formatter and
# the safe fixes. The steps read the tree and write nothing, so they run side by side; their
# reports are printed in this order once all are done.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=./node_modules/.bin
out=$(mktemp -d -t host-gate.XXXXXX)
trap 'rm -rf "$out"' EXIT
names=(format lint types unused)
step() {
  local name=$1; shift
  if "$@" >"$out/$name.log" 2>&1; then echo ok >"$out/$name.rc"; else echo "FAILED ($*)" >"$out/$name.rc"; fi
}
step format "$bin/biome" format --colors=off . &
step lint "$bin/biome" lint --colors=off --error-on-warnings . &
step types "$bin/tsc" --noEmit &
step unused "$bin/knip" --no-progress &
wait
failed=0
for name in "${names[@]}"; do
  rc=$(cat "$out/$name.rc" 2>/dev/null || echo "FAILED (did not finish)")
  if [ "$rc" = ok ]; then
    echo "gate: $name ok"
  else
    tail -40 "$out/$name.log"
    echo "gate: $name $rc"
    failed=1
  fi
done
exit $failed
