#!/usr/bin/env bash
# Installs what is needed, builds, and starts a single-node broker on
# 127.0.0.1:9092 with its data in ./sluice-data. Extra arguments go to
# `sluice serve` (for example --config sluice.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Only the broker binary: tests and benchmarks are the test command's.
SLUICE_BUILD_TARGET=sluice bash scripts/build.sh build
exec build/bin/sluice serve "$@"
