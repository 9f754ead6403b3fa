#!/usr/bin/env bash
# Builds the libFuzzer targets in their own build directory (clang, ASan,
# UBSan) and runs each for a bounded time from a generated seed corpus:
# request decoding, record-level validation of produced batches, and
# compressed payloads under every codec id.
#   tests/fuzz/run.sh [SECONDS]     (default 60 for requests; the two record
#                                    targets get half as long each)
# Environment: SLUICE_FUZZ_BUILD_DIR (default <repo>/build-fuzz).
# Exits non-zero if the build fails or a fuzzer finds a crash, a leak, a
# property violation or an input that takes more than 10 s; the reproducer
# is left in the build directory (crash-*, leak-*, timeout-*).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/../.." && pwd)"
build="${SLUICE_FUZZ_BUILD_DIR:-$src/build-fuzz}"
seconds="${1:-60}"
half=$(( (seconds + 1) / 2 ))

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$src" -B "$build" -G Ninja -DSLUICE_FUZZ=ON >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2 --target fuzz_request fuzz_record_batch fuzz_compressed_batch fuzz_seed_corpus

corpus="$build/fuzz-corpus"
mkdir -p "$corpus/request" "$corpus/record_batch" "$corpus/compressed_batch"
"$build/bin/fuzz_seed_corpus" "$corpus/request" "$corpus/record_batch" "$corpus/compressed_batch"
cd "$build"
run() {
  local target=$1 secs=$2
  echo "== $target for ${secs}s"
  "$build/bin/$target" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "$corpus/${target#fuzz_}"
}
run fuzz_request "$seconds"
run fuzz_record_batch "$half"
run fuzz_compressed_batch "$half"
