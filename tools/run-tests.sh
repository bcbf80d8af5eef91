#!/usr/bin/env bash
# `npm test`: makes sure redis-server is present (tests start real ones), runs `bun test`,
# and prints the plain "N passed, N failed, N skipped" line from bun's real counts.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "redis-server not found: installing it with apt-get"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >/dev/null 2>&1 \
      || echo "warning: could not install redis-server; Redis-backed tests will fail"
  else
    echo "warning: redis-server is not on PATH (install it, e.g. apt-get install redis-server); Redis-backed tests will fail"
  fi
fi

# The gate (formatting, lint, the type check, unused code): tools/gate.sh names each failing
# step; the tests run either way, and a failing step fails the command.
gate_failed=()
if [ "${HOST_SKIP_GATE:-}" != "1" ]; then
  gate_out=$(bash tools/gate.sh 2>&1); gate_rc=$?
  echo "$gate_out"
  if [ "$gate_rc" -ne 0 ]; then
    read -r -a gate_failed <<< "$(echo "$gate_out" | sed -n 's/^gate: \([a-z]*\) FAILED.*/\1/p' | tr '\n' ' ')"
    [ ${#gate_failed[@]} -gt 0 ] || gate_failed=(gate)
  fi
fi

log=$(mktemp /tmp/host-tests.XXXXXX.log)
BUN="./node_modules/.bin/bun"
[ -x "$BUN" ] || BUN="bun"
# HOST_TEST_PARALLEL=N runs test files in N processes (bun's --parallel): faster on an idle
# machine with cores to spare; the default runs them one after another, the way CI is measured.
parallel=()
if [[ "${HOST_TEST_PARALLEL:-}" =~ ^[1-9][0-9]?$ ]]; then parallel=("--parallel=$HOST_TEST_PARALLEL"); fi
"$BUN" test --timeout 30000 "${parallel[@]}" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

pass=$(grep -E '^ *[0-9]+ pass$' "$log" | tail -1 | grep -oE '[0-9]+' || true)
fail=$(grep -E '^ *[0-9]+ fail$' "$log" | tail -1 | grep -oE '[0-9]+' || true)
skip=$(grep -E '^ *[0-9]+ skip$' "$log" | tail -1 | grep -oE '[0-9]+' || true)
pass=${pass:-0}; fail=${fail:-0}; skip=${skip:-0}
# bun reports files that failed to load as errors outside the counts; count them as failures.
errors=$(grep -cE '^error: .*(Cannot find|SyntaxError|failed to load)' "$log" || true)
if [ "$rc" -ne 0 ] && [ "$fail" = "0" ]; then fail=1; fi
echo
if [ ${#gate_failed[@]} -gt 0 ]; then
  echo "gate failed: ${gate_failed[*]} (run npm run fix, then read the messages above)"
  fail=$((fail + ${#gate_failed[@]}))
fi
echo "${pass} passed, ${fail} failed, ${skip} skipped"
rm -f "$log"
if [ "$rc" -ne 0 ] || [ "$fail" != "0" ] || [ "$pass" = "0" ]; then exit 1; fi
exit 0
