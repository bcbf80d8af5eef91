#!/usr/bin/env bash
# The gate (`npm run lint`, and the first step of `npm test`): formatting and lint (Biome), the
# type check (tsc) and unused files, exports and dependencies (knip). Every step runs; each one
# that fails is named on a line "gate: <step> FAILED". `npm run fix` applies the formatter and
# the safe fixes.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=./node_modules/.bin
failed=0
step() {
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then
    echo "gate: $name ok"
  else
    echo "$out" | tail -40
    echo "gate: $name FAILED ($*)"
    failed=1
  fi
}
step format "$bin/biome" format --colors=off .
step lint "$bin/biome" lint --colors=off --error-on-warnings .
step types "$bin/tsc" --noEmit
step unused "$bin/knip" --no-progress
exit $failed
