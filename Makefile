# rperf — build, test, benchmark, fuzz.
#
#   make build          static, pure-Go binaries in bin/ (rperf, rdiag)
#   make test           format check, vet, all tests, race tests of the engine and rperf,
#                       every fuzz target for FUZZTIME_TEST beyond its seeds
#   make bench          Go benchmarks (-count=5) into bench.txt
#   make bench-rperf    rperf's own cost per latency iteration beside the engine's round trip
#   make raw-pacing     raw-bw's pacing error at 10, 100, 1000 Mb/s, two processes over veth (root; docs/raw-pacing.sh)
#   make fuzz           every fuzz target for FUZZTIME each
#   make calibrate      rperf compare's A/A campaign, live (REPORTS=40; UPDATE=1 rewrites the corpus and docs/compare.md)
#   make build-ibverbs  rdiag/rperf with the rdma-core provider (needs libibverbs-dev, librdmacm-dev)

GO            ?= go
FUZZTIME      ?= 60s
FUZZTIME_TEST ?= 5s
BIN      := bin
CMDS     := $(wildcard cmd/*)

.PHONY: all build test fmt-check vet test-unit test-race test-ibverbs test-fuzz bench bench-rperf raw-pacing fuzz calibrate build-ibverbs clean

all: build

build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ $(addprefix ./,$(CMDS))
	@if ! command -v file >/dev/null; then \
		echo "NOTE: 'file' is not installed, so the static-link check was skipped (apt-get install -y file; .ci/run installs it)"; \
	else for b in $(notdir $(CMDS)); do \
		file $(BIN)/$$b 2>/dev/null | grep -q 'statically linked' || { echo "$(BIN)/$$b is not statically linked"; exit 1; }; \
	done; fi

test: fmt-check vet build test-unit test-race test-ibverbs test-fuzz

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	CGO_ENABLED=0 $(GO) vet ./...

test-unit:
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 15m ./...

# The race detector needs cgo, hence a C compiler.
test-race:
	@if command -v $${CC:-gcc} >/dev/null || command -v cc >/dev/null; then \
		echo "CGO_ENABLED=1 $(GO) test -count=1 -race -timeout 15m ./verbsio/... ./internal/cli/... ./internal/suite/... ./tests/..."; \
		CGO_ENABLED=1 $(GO) test -count=1 -race -timeout 15m ./verbsio/... ./internal/cli/... ./internal/suite/... ./tests/...; \
	else \
		echo "NOTE: no C compiler, so the race tests were skipped (apt-get install -y gcc; .ci/run installs it)"; \
	fi

# The hardware provider's cgo build: compiled, vetted and unit-tested
# (its device tests say when no RDMA device exists), with the kernel CM
# (verbsio/cm over librdmacm) tested against its fake.
test-ibverbs:
	@if [ -f /usr/include/infiniband/verbs.h ] && [ -f /usr/include/rdma/rdma_cma.h ]; then \
		echo "CGO_ENABLED=1 $(GO) vet -tags ibverbs ./verbsio/hw/... ./verbsio/cm/... ./cmd/..."; \
		CGO_ENABLED=1 $(GO) vet -tags ibverbs ./verbsio/hw/... ./verbsio/cm/... ./cmd/... && \
		CGO_ENABLED=1 $(GO) build -tags ibverbs -o /dev/null ./cmd/rperf ./cmd/rdiag && \
		CGO_ENABLED=1 $(GO) test -count=1 -tags ibverbs ./verbsio/hw/... && \
		CGO_ENABLED=1 $(GO) test -count=1 -tags ibverbs -run Kernel ./verbsio/cm/...; \
	else \
		echo "NOTE: libibverbs-dev or librdmacm-dev is not installed, so the ibverbs (cgo) provider was not compiled."; \
		echo "      apt-get install -y libibverbs-dev librdmacm-dev   (.ci/run installs them)"; \
	fi

build-ibverbs:
	@mkdir -p $(BIN)
	CGO_ENABLED=1 $(GO) build -tags ibverbs -o $(BIN)/ $(addprefix ./,$(CMDS))

bench:
	CGO_ENABLED=0 $(GO) test -run '^$$' -bench . -benchmem -count=5 -timeout 60m ./... | tee bench.txt

raw-pacing: build
	sh docs/raw-pacing.sh $(BIN)/rperf

bench-rperf:
	CGO_ENABLED=0 $(GO) test -run '^$$' -bench IterationOverhead -benchmem -count=5 ./tests/latency/

# Every fuzz target in the repository, found in the sources (a new one
# is picked up without listing it): "package-dir target" per line.
FUZZ_TARGETS = grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' . | \
	sed -E 's|^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort

# Each target for a bounded time beyond its seed corpus (which test-unit
# runs): FUZZTIME_TEST in make test, FUZZTIME in make fuzz. Two targets
# run at a time, one fuzzing worker each, so that one's build overlaps the
# other's fuzzing; a failure stops the run with the target's output. Go
# 1.26's fuzz coordinator can end a timed run with a bare "context
# deadline exceeded" and no failing input (go.dev/issue/75804, fixed in
# 1.27): that alone is noted, not failed; any failing input fails.
FUZZ_JOBS ?= 2
define run_fuzz
	@$(FUZZ_TARGETS) | xargs -P $(FUZZ_JOBS) -L 1 sh -c '\
		out=$$($(GO) test -run "^$$" -fuzz "^$$1$$" -fuzztime $(1) -parallel 1 ./$$0 2>&1) && \
			{ echo "ok   $$0 $$1 ($(1) beyond its seeds)"; exit 0; }; \
		if printf "%s" "$$out" | grep -q "^    context deadline exceeded$$" && \
			! printf "%s" "$$out" | grep -q "Failing input written to"; then \
			echo "ok   $$0 $$1 ($(1) beyond its seeds; the coordinator ended it with go.dev/issue/75804, no failing input)"; exit 0; \
		fi; \
		printf "FAIL %s %s\n%s\n" "$$0" "$$1" "$$out"; exit 255'
endef

test-fuzz:
	$(call run_fuzz,$(FUZZTIME_TEST))

fuzz:
	$(call run_fuzz,$(FUZZTIME))

# rperf compare's false-alarm and detection rates on a new A/A campaign of
# this machine (docs/compare.md): REPORTS suites of bin/rperf against itself.
REPORTS ?= 40
calibrate: build
	$(GO) run ./internal/calibrate/campaign -rperf $(BIN)/rperf -reports $(REPORTS) $(if $(UPDATE),-update)

clean:
	rm -rf $(BIN) bench.txt

# --- interop: rperf against real Linux Soft-RoCE and unmodified perftest ---
# (tests/interop; not part of make test; as root; a qemu VM built from
# Debian 12's packages, cached in /tmp/interop-build, results in
# /tmp/interop-results/<time>)
#   make interop                    the matrix, one table; exit 1 if a line failed
#   make interop PERFTEST_SRC=dir   ... with upstream perftest (source tree or binaries) as an extra peer
#   make interop-bench              perftest vs rperf (ibverbs) on rxe0, alternating, three runs each
#   INTEROP_FLAGS="-run REGEXP"     a subset (-list shows the lines); -capture records perftest's exchanges
PERFTEST_SRC  ?=
INTEROP_FLAGS ?=

.PHONY: interop interop-bench

interop:
	$(GO) run ./tests/interop/cmd/interop $(if $(PERFTEST_SRC),-perftest $(PERFTEST_SRC)) $(INTEROP_FLAGS)

interop-bench:
	$(GO) run ./tests/interop/cmd/interop -bench $(INTEROP_FLAGS)
