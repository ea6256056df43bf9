#!/usr/bin/env bash
# `make bench` (size section): the Worker's upload size as wrangler reports
# it (`wrangler deploy --dry-run`: total and gzip; the Free plan allows 3 MB
# gzip), side by side for
#
#   before        the commit before the unicode-v2 chunker (BENCH_BASE), built
#                 in a git worktree under target/bench-size/;
#   after         this checkout;
#   text-splitter this checkout with `--features text-splitter`: the Worker
#                 with the text-splitter crate chunking instead (never deployed).
#
# Prints a Markdown table. Needs scripts/setup.sh to have run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BENCH_BASE="${BENCH_BASE:-6f47def}"
WORK=target/bench-size
WRANGLER="$ROOT/node_modules/.bin/wrangler"
export WRANGLER_SEND_METRICS=false CI=1
mkdir -p "$WORK"

# Upload sizes of a built Worker whose entry module is $2, with the
# configuration $1 (rewritten to point at it, with no build step).
dry_run() {
  local config=$1 main=$2 out
  out=$(mktemp "$ROOT/.bench-wrangler.XXXXXX.toml")
  sed -e "s|^main = .*|main = \"$main\"|" -e '/^\[build\]/,/^command/d' "$config" > "$out"
  local report
  report=$("$WRANGLER" deploy --dry-run --outdir "$WORK/dry-run" -c "$out" 2>&1 || true)
  rm -f "$out"
  # "Total Upload: 1430.17 KiB / gzip: 468.46 KiB"
  echo "$report" | sed -n 's/.*Total Upload: \([0-9.]* KiB\) \/ gzip: \([0-9.]* KiB\).*/\1|\2/p' | tail -1
}

wasm_bytes() { wc -c < "$1" | tr -d ' '; }
wasm_gzip() { gzip -9 -c "$1" | wc -c | tr -d ' '; }

row() {
  local label=$1 wasm=$2 sizes=$3
  local total=${sizes%%|*} gz=${sizes##*|}
  printf '| %s | %s | %s | %s | %s |\n' "$label" "$(wasm_bytes "$wasm")" "$(wasm_gzip "$wasm")" "$total" "$gz"
}

echo "### Worker size (wrangler deploy --dry-run)"
echo
echo "| build | wasm bytes | wasm gzip -9 bytes | upload total | upload gzip |"
echo "|---|---:|---:|---:|---:|"

# before: the base commit, built in a worktree with its own scripts.
if git rev-parse --verify --quiet "$BENCH_BASE^{commit}" >/dev/null; then
  base_dir="$WORK/base"
  if [ ! -d "$base_dir" ]; then
    git worktree add --force --detach "$base_dir" "$BENCH_BASE" >/dev/null 2>&1
  fi
  ln -sfn "$ROOT/node_modules" "$base_dir/node_modules"
  (cd "$base_dir" && CARGO_TARGET_DIR="$ROOT/target/bench-size/base-target" sh scripts/build-worker.sh >/dev/null 2>&1)
  row "before ($BENCH_BASE, greedy-v1)" "$base_dir/build/index_bg.wasm" \
    "$(dry_run "$base_dir/wrangler.toml" "$ROOT/$base_dir/build/index.js")"
else
  echo "| before ($BENCH_BASE) | not in this clone's history | | | |"
fi

sh scripts/build-worker.sh >/dev/null 2>&1
row "after (unicode-v2)" build/index_bg.wasm "$(dry_run wrangler.toml "$ROOT/build/entry.mjs")"

OUT_DIR=build-text-splitter sh scripts/build-worker.sh --features text-splitter >/dev/null 2>&1
row "text-splitter 0.33.1 instead" build-text-splitter/index_bg.wasm \
  "$(dry_run wrangler.toml "$ROOT/build-text-splitter/entry.mjs")"
echo
