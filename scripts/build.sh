#!/usr/bin/env bash
# Configures and builds Sluice into build/ (or the directory given as $1, with
# further cmake arguments after it). Needs the packages of install-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
target=()
if [ "${SLUICE_BUILD_TARGET:-}" != "" ]; then target=(--target "$SLUICE_BUILD_TARGET"); fi
# ccache keys on paths relative to the checkout, so clones share the cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)" "${target[@]}"
