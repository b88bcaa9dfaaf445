# Thin wrapper over CMake. `make run` and `make test` work on a fresh Debian 12 machine.
BUILD ?= build
JOBS ?= $(shell nproc)
TFM_WERROR ?= OFF
CMAKE_FLAGS ?=

.PHONY: all setup configure build test run clean
all: build

setup:
	@scripts/setup

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DTFM_WERROR=$(TFM_WERROR) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

run: build
	@$(BUILD)/tfm generate --prompt "The old man said" --max-new-tokens 40

clean:
	rm -rf $(BUILD)
