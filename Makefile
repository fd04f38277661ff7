# The two commands a newcomer types: `make demo` and `make test`.
# Both install the Debian packages they need (idempotently) and build first.
# CI (.ci/run) adds: format-check, fuzz-smoke, warnings as errors, test-asan, test-tsan.
BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
TSAN_DIR  ?= build-tsan
FUZZ_DIR  ?= build-fuzz
PYTHON    := /usr/bin/python3
JOBS      ?= 2
CMAKE_FLAGS ?=
# Warnings are errors in CI (CI=true, as .ci/run and CI services set it).
CI_BUILD := $(filter true 1,$(CI))
WERROR ?= $(if $(CI_BUILD),ON,OFF)
# CI's build/ has line tables only (-g1): GCC makes the same code whatever the
# debug level, and full debug info costs a sixth of the compile time. And it is a
# unity build (each target's sources compiled in batches of 16: a third of the
# compile time), as the sanitizer trees are. Everywhere else build/ compiles each
# file alone, so a file that compiles only beside another fails on the machine of
# whoever wrote it, before CI sees it.
CI_BUILD_FLAGS = $(if $(CI_BUILD),-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
                 -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
                 -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16,-DCMAKE_UNITY_BUILD=OFF)
# ccache where it is installed (deps installs it; never required), keyed on
# paths relative to the checkout and not on the build folder, so that another
# clone of the same commit on this machine reuses the objects of a build/ that
# compiles each file alone and the fuzz tree's (not the unity trees': their
# batches name sources by absolute path); depend
# mode takes the headers from the compiler's own dependency list (no second
# preprocessor run on a miss).
ifneq ($(shell command -v ccache),)
LAUNCHER_FLAGS = -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
                 -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= true
export CCACHE_DEPEND ?= true
endif

.PHONY: all deps configure build demo cluster-demo test test-unit bench clean \
        format format-check asan-build test-asan test-asan-full tsan-build test-tsan fuzz fuzz-build fuzz-smoke

all: build

deps:
	./scripts/install_deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DPython3_EXECUTABLE=$(PYTHON) -DGANDIVA_WERROR=$(WERROR) \
	  $(CI_BUILD_FLAGS) $(LAUNCHER_FLAGS) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

# Two real training jobs time-sliced on one device by a real gandivad. Builds
# only what it runs (gandivad, the CLI, the Python package, the libtorch job),
# not the tests and benches.
DEMO_TARGETS = gandivad gandiva_cli _gandiva train_mlp
demo: configure
	cmake --build $(BUILD_DIR) -j$(JOBS) --target $(DEMO_TARGETS)
	$(PYTHON) examples/demo.py --build $(BUILD_DIR)

# Three gandivad nodes and a `gandiva scheduler` on this machine, four real jobs (~1 minute).
cluster-demo: build
	./scripts/cluster_demo.sh $(BUILD_DIR)

# Unit, integration and Python tests (GPU-only tests skip without a GPU).
test: build
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900 -j$(JOBS)

test-unit: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L unit

bench: build
	./bench/run_all.sh $(BUILD_DIR) $(BUILD_DIR)/bench-results

# Every tracked C/C++ file against .clang-format (the apt clang-format, 14 on Debian 12).
FORMATTED = git ls-files -z '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh'
format-check: deps
	$(FORMATTED) | xargs -0 clang-format --dry-run --Werror

format: deps
	$(FORMATTED) | xargs -0 clang-format -i

# Sanitizer trees: -O1 with asserts on, no benches, no libtorch example (a
# slow compile of code that is not ours; the tests that use it skip). Line
# tables (-g1) are all a report's stack needs. Unity builds (a target's sources
# compiled in batches) cut their compile time by two thirds; build/ compiles
# every file alone, so a file that builds only beside another still fails there.
SAN_FLAGS = -DPython3_EXECUTABLE=$(PYTHON) -DGANDIVA_WERROR=$(WERROR) \
            -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g1 -O1" -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" \
            -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
            -DGANDIVA_BUILD_BENCH=OFF -DGANDIVA_BUILD_TORCH_EXAMPLES=OFF $(LAUNCHER_FLAGS)

# The unit tests and the integration suites that reach code no unit test runs,
# under ASan+UBSan (CI); test-asan-full: every suite that can run under them.
# scripts/test_sanitized.sh says which and why.
asan-build: deps
	cmake -S . -B $(ASAN_DIR) $(SAN_FLAGS) -DGANDIVA_SANITIZE="address;undefined"
	cmake --build $(ASAN_DIR) -j$(JOBS)

test-asan: asan-build
	./scripts/test_sanitized.sh asan $(ASAN_DIR)

test-asan-full: asan-build
	GANDIVA_ASAN_FULL=1 ./scripts/test_sanitized.sh asan $(ASAN_DIR)

# The threaded unit tests under TSan: only their targets are built.
TSAN_TARGETS = common_test runtime_test checkpoint_test node_test shim_trace_test
tsan-build: deps
	cmake -S . -B $(TSAN_DIR) $(SAN_FLAGS) -DGANDIVA_SANITIZE=thread -DGANDIVA_WITH_CUDA=OFF
	cmake --build $(TSAN_DIR) -j$(JOBS) --target $(TSAN_TARGETS)

test-tsan: tsan-build
	./scripts/test_sanitized.sh tsan $(TSAN_DIR)

# libFuzzer harnesses (fuzz/README.md), in their own clang tree: every file with
# libFuzzer's coverage hooks, ASan and UBSan; only the harnesses' targets are built.
FUZZERS = fuzz_api_request fuzz_checkpoint_stream fuzz_trace_csv fuzz_key_files fuzz_sealed_frames \
          fuzz_handoff fuzz_control_block
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS = -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
fuzz-build: deps
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_DIR) -DPython3_EXECUTABLE=$(PYTHON) \
	  -DGANDIVA_WERROR=$(WERROR) -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_C_FLAGS_DEBUG="-g1 -O1" -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" \
	  -DCMAKE_C_FLAGS="$(FUZZ_CFLAGS)" -DCMAKE_CXX_FLAGS="$(FUZZ_CFLAGS)" \
	  -DGANDIVA_BUILD_FUZZERS=ON -DGANDIVA_BUILD_TESTS=OFF -DGANDIVA_BUILD_BENCH=OFF \
	  -DGANDIVA_BUILD_TORCH_EXAMPLES=OFF -DGANDIVA_WITH_CUDA=OFF $(LAUNCHER_FLAGS) $(CMAKE_FLAGS)
	cmake --build $(FUZZ_DIR) -j$(JOBS) --target $(FUZZERS)

# Each harness for FUZZ_SECONDS on a copy of its seed corpus (in $(FUZZ_DIR)),
# after replaying its regression inputs; prints each one's executions.
fuzz: fuzz-build
	./scripts/run_fuzzers.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZERS)

# CI: the regressions and a few seconds each.
fuzz-smoke:
	$(MAKE) fuzz FUZZ_SECONDS=5

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR)

# The GPU suite (docs/gpu.md): one table + gpu_suite.json; exits 77 without a GPU.
# GPU_SUITE_ARGS: e.g. --device cpu (the dry run), --bundle .gpu-bundle, --only ROW.
gpu-check: build
	$(PYTHON) tests/gpu/gpu_suite.py --build $(BUILD_DIR) --json $(BUILD_DIR)/gpu_suite.json $(GPU_SUITE_ARGS)
