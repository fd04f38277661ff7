# The two commands a newcomer types: `make demo` and `make test`.
# Both install the Debian packages they need (idempotently) and build first.
BUILD_DIR ?= build
PYTHON    := /usr/bin/python3
JOBS      ?= 2
CMAKE_FLAGS ?=

.PHONY: all deps configure build demo test test-unit bench clean

all: build

deps:
	./scripts/install_deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DPython3_EXECUTABLE=$(PYTHON) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

# Two real training jobs time-sliced on one device by a real gandivad.
demo: build
	$(PYTHON) examples/demo.py --build $(BUILD_DIR)

# Unit, integration and Python tests (GPU-only tests skip without a GPU).
test: build
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900

test-unit: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L unit

bench: build
	./bench/run_all.sh $(BUILD_DIR) $(BUILD_DIR)/bench-results

clean:
	rm -rf $(BUILD_DIR)

# The GPU suite (docs/gpu.md): one table + gpu_suite.json; exits 77 without a GPU.
# GPU_SUITE_ARGS: e.g. --device cpu (the dry run), --bundle .gpu-bundle, --only ROW.
gpu-check: build
	$(PYTHON) tests/gpu/gpu_suite.py --build $(BUILD_DIR) --json $(BUILD_DIR)/gpu_suite.json $(GPU_SUITE_ARGS)
