# The two commands of the README. Both set up the machine if needed (idempotent) and build into build/.
BUILD ?= build
GENERATOR ?= Ninja
JOBS ?= $(shell nproc)

.PHONY: all setup configure build test demo clean
all: build

setup:
	@scripts/setup

$(BUILD)/build.ninja $(BUILD)/Makefile: | setup
	cmake -S . -B $(BUILD) -G $(GENERATOR)

configure: setup
	@[ -f $(BUILD)/CMakeCache.txt ] || cmake -S . -B $(BUILD) -G $(GENERATOR)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900

demo: build
	$(BUILD)/bin/acc-demo

clean:
	rm -rf $(BUILD)
