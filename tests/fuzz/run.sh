#!/usr/bin/env bash
# Builds the libFuzzer request decoder in its own build directory (clang,
# ASan, UBSan) and runs it for a bounded time from a generated seed corpus.
#   tests/fuzz/run.sh [SECONDS]     (default 60)
# Environment: SLUICE_FUZZ_BUILD_DIR (default <repo>/build-fuzz).
# Exits non-zero if the build fails or the fuzzer finds a crash, a leak, a
# property violation or an input that takes more than 10 s; the reproducer
# is left in the build directory (crash-*, leak-*, timeout-*).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/../.." && pwd)"
build="${SLUICE_FUZZ_BUILD_DIR:-$src/build-fuzz}"
seconds="${1:-60}"

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$src" -B "$build" -G Ninja -DSLUICE_FUZZ=ON >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2 --target fuzz_request fuzz_seed_corpus

corpus="$build/fuzz-corpus/request"
mkdir -p "$corpus"
"$build/bin/fuzz_seed_corpus" "$corpus"
cd "$build"
"$build/bin/fuzz_request" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 "$corpus"
