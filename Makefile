# kpssh — the front door. `make test` is what CI runs (through .ci/run); every target installs
# or builds what it needs first. The real work lives in CMake presets and scripts/.

PRESET ?= dev
JOBS ?= 2
BUILD := build/$(PRESET)
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all deps configure build test unit fault integration e2e fuzz-replay torture harness \
	demo demo-down check check-ci format fuzz analyze tidy clean help bench-provider bench-informer \
	bench-scheduler

all: build

help:
	@echo "make demo        a lab cluster and a pool of SSH hosts; scale up and down; leaves it up"
	@echo "make demo-down   stop what make demo started"
	@echo "make deps        install missing Debian packages (idempotent)"
	@echo "make build       configure and build the $(PRESET) preset"
	@echo "make test        deps, harness, build, then every test tier"
	@echo "make unit|fault|integration|e2e|fuzz-replay|torture   one tier"
	@echo "make check       format, banned functions, layering, shellcheck, cppcheck, clang-tidy,"
	@echo "                 gcc -fanalyzer"
	@echo "make fuzz        run each libFuzzer driver for FUZZ_SECONDS (default 60)"
	@echo "make harness     build the pinned Kubernetes binaries for the test lab"
	@echo "make bench-provider|bench-informer   a lab benchmark, lab brought up around it"
	@echo "                 (BENCH_ARGS=... passes options, KPSSH_LAB_ID=N picks the lab)"
	@echo "make bench-scheduler   our scheduler and Karpenter's own scheduling benchmarks side by side"
	@echo "                 (SIZES=\"1 50 ...\", BENCH_ARGS=--large adds 10000 and 20000 pods;"
	@echo "                 fetches go1.27.3 and Karpenter through the Go module proxy)"

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja:
	cmake --preset $(PRESET)

configure: $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

harness:
	@if [ -x tests/k8s-harness/build.sh ]; then tests/k8s-harness/build.sh; fi

# The order matters on a fresh machine: packages, then the Kubernetes binaries the integration
# tier needs, then our code, then every tier in one ctest run so its summary is the last word.
test: deps harness build
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure --no-tests=error

unit: build
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure -L unit

torture: build
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure -L torture

fault: build
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure -L fault --no-tests=error

fuzz-replay: build
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure -L fuzz

integration: deps harness build
	cd $(BUILD) && ctest --output-on-failure -L integration --no-tests=error

# Benchmarks that need the lab (bench/): the lab is brought up around each; they print figures
# and gate nothing. KPSSH_LAB_ID picks the lab instance (default 0).
bench-provider: deps harness build
	scripts/lab-bench.sh $(BUILD)/bench/bench-provider $(BENCH_ARGS)

bench-informer: deps harness build
	scripts/lab-bench.sh $(BUILD)/bench/bench-informer $(BENCH_ARGS)

# No lab: bench-scheduler -k and -p (release preset) against Karpenter's own BenchmarkScheduling<N>
# and Benchmark{Respect,Ignore}Preferences from the pinned module bench/karpenter, which the
# script builds with GOTOOLCHAIN=go1.27.3, then bench-scheduler -b (kpssh only). Nothing else in
# the tree (test, check, CI) touches that module.
bench-scheduler: deps
	scripts/bench-scheduler.sh $(BENCH_ARGS)

# The e2e scenarios (tests/e2e): the lab, kube-scheduler, sshd hosts and kpssh-controller as its
# own process, the whole cycle as users meet it.
e2e: deps harness build
	cd $(BUILD) && ctest --output-on-failure -L e2e --no-tests=error

# The whole cycle on this machine (scripts/demo.sh says what it shows); leaves the lab and the
# controller running for looking around until `make demo-down`.
demo: deps harness build
	KPSSH_DEMO_BUILD=$(CURDIR)/$(BUILD) scripts/demo.sh up

demo-down:
	scripts/demo.sh down

check: deps
	scripts/check-format.sh
	scripts/check-banned.sh
	scripts/check-layers.sh
	scripts/check-shell.sh
	scripts/check-static.sh

# What fits CI's budget: the same checks with clang-tidy limited to the layers STYLE.md names.
check-ci: deps
	scripts/check-format.sh
	scripts/check-banned.sh
	scripts/check-layers.sh
	scripts/check-shell.sh
	KP_TIDY_SCOPE=ci scripts/check-static.sh

format:
	scripts/check-format.sh --fix

analyze:
	cmake --preset analyze
	cmake --build build/analyze -j $(JOBS)

FUZZ_SECONDS ?= 60
fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf build
