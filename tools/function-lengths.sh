#!/usr/bin/env bash
# Lists the functions longer than N lines (default 100, blank lines not counted) with Biome's
# rule complexity/noExcessiveLinesPerFunction, run from a temporary config that extends the
# repository's biome.json, so the committed config is left as it is.
# Usage: bash tools/function-lengths.sh [max-lines] [path...]   (default: 100 src; paths are
# relative to the repository root).
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-100}
shift || true
[ $# -gt 0 ] || set -- src
case $max in '' | *[!0-9]*) echo "max-lines must be a number" >&2; exit 2 ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/biome.json" <<JSON
{
  "extends": ["$PWD/biome.json"],
  "vcs": { "enabled": false },
  "linter": {
    "rules": {
      "complexity": {
        "noExcessiveLinesPerFunction": {
          "level": "error",
          "options": { "maxLines": $max, "skipBlankLines": true }
        }
      }
    }
  }
}
JSON
# Only this rule's findings, one "file:line:col  lines" per over-long function, then the count.
# (vcs is off because Biome resolves .gitignore next to the config file, here the temp dir.)
# Exit status: 0 none over, 1 some over, 2 Biome could not run (its output is shown).
out=$(./node_modules/.bin/biome lint --colors=off --config-path="$tmp" \
  --only=complexity/noExcessiveLinesPerFunction --max-diagnostics=none "$@" 2>&1) || true
if ! grep -q '^Checked [0-9]* file' <<<"$out" ||
  grep -qE '(fs/cantRead|internalError/|^configuration )' <<<"$out"; then
  printf '%s\n' "$out" >&2
  exit 2
fi
awk -v max="$max" '
  /lint\/complexity\/noExcessiveLinesPerFunction/ { at = $1 }
  /has too many lines \(/ && at != "" {
    match($0, /\([0-9]+\)/); printf "%s  %s\n", at, substr($0, RSTART + 1, RLENGTH - 2)
    at = ""; n++
  }
  END { printf "functions over %d lines: %d\n", max, n; exit n > 0 }' <<<"$out"
