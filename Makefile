# The two commands of the README. Both install what is missing, then build.
#   make demo   the main job on a built-in default: the graph pipeline at 4 ranks
#   make test   every test, in the normal build and under ASan+UBSan
BUILD      ?= build
BUILD_SAN  ?= build-san
JOBS       ?= $(shell nproc)
CMAKE_GEN  := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
# ccache (when installed) makes rebuilds in several checkouts cheap: paths
# under the checkout are hashed relative to it, and objects hold no absolute
# path (-ffile-prefix-map in CMakeLists.txt), so the checkout's directory
# need not be hashed either.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1
CMAKE_LAUNCH := $(shell command -v ccache >/dev/null 2>&1 && echo "-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache")

.PHONY: all setup build build-san demo test test-release test-san clean wheel

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) $(CMAKE_LAUNCH) -DCMAKE_BUILD_TYPE=Release >/dev/null

# Debug (assertions on) at -O1: AddressSanitizer's recommended level, several
# times faster than -O0 under the sanitizers, with the same checks. -g1: line
# tables only (no types or variables), all a sanitizer's stack trace needs to
# name file:line and inlined frames; against -g the objects are 2.3x smaller
# and a test file compiles in 30% less CPU time.
$(BUILD_SAN)/CMakeCache.txt: | setup
	@cmake -S . -B $(BUILD_SAN) $(CMAKE_GEN) $(CMAKE_LAUNCH) -DCMAKE_BUILD_TYPE=Debug -DTESSERA_SANITIZE=ON \
	  "-DCMAKE_C_FLAGS_DEBUG=-g1 -O1" "-DCMAKE_CXX_FLAGS_DEBUG=-g1 -O1" >/dev/null

build: setup $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS)

build-san: setup $(BUILD_SAN)/CMakeCache.txt
	@cmake --build $(BUILD_SAN) -j $(JOBS)

# $(BUILD)/dist/tessera-*.whl: the Python package made from this build tree,
# as `pip install ./python` does after `make build` (its targets brought up
# to date, `cmake --install --component python`, zipped:
# python/build_backend/tessera_wheel.py). For the Python the tree builds for.
PYTHON ?= /usr/bin/python3
wheel: setup $(BUILD)/CMakeCache.txt
	@TESSERA_BUILD_DIR=$(abspath $(BUILD)) CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) \
	  $(PYTHON) python/build_backend/tessera_wheel.py $(BUILD)/dist

demo: setup $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS) --target tessera_cli  # only what the demo runs
	@./$(BUILD)/tessera pipeline -n 4 --scale 18

# -j 4 with PROCESSORS = the ranks a test runs at once (tests/CMakeLists.txt):
# two 2-rank tests share the machine, a 4-rank test runs alone. A test is
# mostly ranks starting and waiting, so two at once take a quarter less time
# than one after the other; tests that measure time are RUN_SERIAL.
# Scripts labelled "script" run once, in test-san (tests/CMakeLists.txt).
CTEST_RELEASE := ctest --output-on-failure -j 4 -LE '^script$$'
CTEST_SAN     := ctest --output-on-failure -j 4 -L sanitize

test-release: build
	@cd $(BUILD) && $(CTEST_RELEASE)

test-san: build-san
	@cd $(BUILD_SAN) && $(CTEST_SAN)

test: test-release test-san

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
