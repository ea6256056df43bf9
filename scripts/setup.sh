#!/usr/bin/env bash
# Installs what the project needs and is missing, idempotently: a second run
# only checks versions. Everything comes from the package registries
# (crates.io, npm); nothing is downloaded from GitHub.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"
WORKER_BUILD_VERSION="0.8.7"

say() { printf 'setup: %s\n' "$*"; }

# 1. The wasm target.
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# 1b. clippy and rustfmt (make lint).
if ! cargo clippy --version >/dev/null 2>&1; then
  say "adding the clippy component"
  rustup component add clippy
fi
if ! cargo fmt --version >/dev/null 2>&1; then
  say "adding the rustfmt component"
  rustup component add rustfmt
fi

# 2. wasm-bindgen-cli at exactly the wasm-bindgen version in Cargo.lock.
want_wb=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have_wb=$("$CARGO_BIN/wasm-bindgen" --version 2>/dev/null | awk '{print $NF}' || true)
if [ "$have_wb" != "$want_wb" ]; then
  say "installing wasm-bindgen-cli $want_wb (found: ${have_wb:-none})"
  # Without --locked: the CLI's own lockfile pins a crate version the
  # registry no longer serves; the CLI's version itself is exact.
  # Only the `wasm-bindgen` binary, without default features: the default
  # build adds a test runner with an HTTP client (rustls, ring) that the
  # build never uses. Measured on 2 cores with a warm registry:
  # 192 s default, 149 s this way (docs/performance.md).
  cargo install wasm-bindgen-cli --version "=$want_wb" --force \
    --no-default-features --bin wasm-bindgen
fi

# 3. worker-build, pinned.
have_wbd=$("$CARGO_BIN/worker-build" --version 2>/dev/null | awk '{print $NF}' || true)
if [ "$have_wbd" != "$WORKER_BUILD_VERSION" ]; then
  say "installing worker-build $WORKER_BUILD_VERSION (found: ${have_wbd:-none})"
  # At opt-level 0: worker-build only orchestrates (it runs cargo and
  # wasm-bindgen and writes a JS shim), so optimising its own code buys
  # nothing and costs minutes. Measured on 2 cores with a warm registry:
  # 296 s at the release default (opt 3), 207 s at opt 1, 91 s at opt 0.
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0 \
    cargo install worker-build --version "=$WORKER_BUILD_VERSION" --locked --force
fi

# 4. wrangler (and workerd) from package-lock.json.
if [ ! -x node_modules/.bin/wrangler ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm packages (npm ci)"
  npm ci --no-audit --no-fund
fi

# 4b. A headless browser for the console's browser tests: Debian's
# chromium (puppeteer-core drives it; nothing is downloaded from the web).
if [ -z "${CHROMIUM_PATH:-}" ] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  say "installing chromium (apt-get) for the browser tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium
fi

# 4c. Python's requests, one of the clients tests/e2e/too-large.test.mjs
# sends an oversized upload with (from PyPI, pinned).
if ! python3 -c 'import requests' >/dev/null 2>&1; then
  say "installing the Python package requests (pip) for the end-to-end tests"
  python3 -m pip install --quiet 'requests==2.34.2'
fi

# 5. Local secrets for wrangler dev.
if [ ! -f .dev.vars ]; then
  say "creating .dev.vars from .dev.vars.example"
  cp .dev.vars.example .dev.vars
fi
say "ready"
