# The two commands of the README. Both set up the machine if needed (idempotent) and build into build/.
BUILD ?= build
GENERATOR ?= Ninja
JOBS ?= $(shell nproc)

.PHONY: all setup configure build test demo clean
all: build

setup:
	@scripts/setup

configure: setup
	@[ -f $(BUILD)/CMakeCache.txt ] || cmake -S . -B $(BUILD) -G $(GENERATOR)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900

# Two CPU processes train a small model with DDP on synthetic data.
demo: build
	$(BUILD)/bin/acc-launch --cpu --num_processes 2 $(BUILD)/bin/acc-demo-train

clean:
	rm -rf $(BUILD)
