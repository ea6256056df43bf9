#!/usr/bin/env bash
# `make test`: the native half (lints, unit, property, SQL, scenarios, the
# simulation) and the end-to-end half (the Worker's wasm build, then tests
# against it in workerd) side by side. The end-to-end tests spend most of
# their time waiting on workerd, the native ones keep both cores busy, so
# side by side the waits are not idle time (docs/performance.md, "make
# test's time", for what was measured). The native half runs at a lower CPU
# priority so that the end-to-end tests' waits see the machine they would
# see alone; the Worker builds in target/worker, so neither cargo waits
# for the other's lock. The end-to-end log is printed when both have ended.
#
#   TEST_SERIAL=1 make test    # one half after the other, output as it comes
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE="${MAKE:-make}"

if [ -n "${TEST_SERIAL:-}" ]; then
  "$MAKE" --no-print-directory test-native && "$MAKE" --no-print-directory test-e2e
  exit
fi

mkdir -p target
log=target/test-e2e.log
echo "make test: the end-to-end tests run beside the native ones; their log: $log"
# In a session of its own, so that an interrupted make test stops it (and
# its wrangler and workerd processes) too: background jobs of a script
# ignore Ctrl-C.
setsid "$MAKE" --no-print-directory test-e2e > "$log" 2>&1 &
e2e_pid=$!
trap 'kill -TERM -- "-$e2e_pid" 2>/dev/null; exit 130' INT TERM
nice -n 10 "$MAKE" --no-print-directory test-native
native=$?
echo "make test: native tests ended (rc=$native); waiting for the end-to-end tests"
wait "$e2e_pid"
e2e=$?
cat "$log"
echo "make test: native rc=$native, end-to-end rc=$e2e"
[ "$native" -eq 0 ] && [ "$e2e" -eq 0 ]
