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

# acc-migrate's diff for examples/programs/mnist_classifier.cpp, the migrated program built and run
# on 2 CPU processes (acc-launch), and its test accuracy (examples/demo/demo.sh).
demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target acc-migrate acc-launch acc
	@examples/demo/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD)
