#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test: the unit and
# integration tests on a plain build, the unit tests again under
# AddressSanitizer and UndefinedBehaviorSanitizer, and the fuzzer for a bounded
# time. Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

echo "== build (RelWithDebInfo)"
bash scripts/build.sh build
echo "== tests (unit + integration)"
ctest --test-dir build --output-on-failure --timeout 900 -j2

echo "== build (ASan + UBSan)"
SLUICE_BUILD_TARGET=unit_tests bash scripts/build.sh build-asan -DSLUICE_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1"
echo "== unit tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure --timeout 900 -j2 -L unit

if [ -f tests/fuzz/run.sh ]; then
  echo "== fuzzing request decoding (bounded time)"
  bash tests/fuzz/run.sh
fi
echo "== all tests passed"
