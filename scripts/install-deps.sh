#!/usr/bin/env bash
# Installs every Debian package that building, running and testing Sluice needs.
# Idempotent: a second run installs nothing new. Run as root on Debian 12.
set -euo pipefail

packages=(
  # toolchain
  build-essential g++ cmake ninja-build ccache pkg-config git clang libclang-rt-14-dev clang-format
  # libraries the code links
  libasio-dev libisal-dev libzstd-dev liblz4-dev libsnappy-dev zlib1g-dev
  libtomlplusplus-dev libcli11-dev libspdlog-dev libfmt-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev librdkafka-dev
  # the NATS C client: sluice-bench cluster publishes to JetStream beside Sluice
  libnats-dev
  # the etcd client (src/etcd): gRPC++ and protobuf, with their code generators
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # real clients and servers used by the integration tests
  kcat etcd-server etcd-client
  # the JetStream cluster sluice-bench cluster compares Sluice with
  nats-server
  python3 python3-pytest python3-confluent-kafka python3-kafka
  procps iproute2
  # stacks of every broker thread in a test's failure message (cluster_harness.py)
  gdb
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Node.js (for the KafkaJS tests): take Debian's unless a node is already present.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all packages present"

# KafkaJS for the integration tests, pinned by its package-lock.json.
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -d "$repo/tests/integration/kafkajs/node_modules/kafkajs" ]; then
  (cd "$repo/tests/integration/kafkajs" && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "install-deps: KafkaJS present"

# @platformatic/kafka (a client of today's protocol versions), pinned likewise.
if [ ! -d "$repo/tests/integration/platformatic/node_modules/@platformatic/kafka" ]; then
  (cd "$repo/tests/integration/platformatic" && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "install-deps: @platformatic/kafka present"
