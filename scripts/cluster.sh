#!/usr/bin/env bash
# Runs a Sluice cluster on this machine for trying it out: a three-member
# etcd and N brokers, all on 127.0.0.1.
#
#   scripts/cluster.sh N [start]   start etcd and brokers 1..N, print the bootstrap string
#   scripts/cluster.sh [N] status  what runs, and the cluster as broker Metadata shows it
#   scripts/cluster.sh [N] stop    stop what `start` recorded, by pid (data is kept)
#
# Ports: etcd clients 2379, 2381, 2383 (peers 2380, 2382, 2384); broker i
# listens on 9091+i (9092, 9093, ...) with its /metrics on 9643+i.
# Data, logs and pid files go to ./sluice-cluster/ (SLUICE_CLUSTER_DIR to
# change). The broker binary is build/bin/sluice of this checkout
# (SLUICE_BIN to change); SESSION_TIMEOUT_MS sets
# sluice.etcd.session.timeout.ms (default 4000).
#
# Processes are stopped only by the pids this script recorded, and only if
# that pid still runs the program it started.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${SLUICE_CLUSTER_DIR:-./sluice-cluster}
sluice_bin=${SLUICE_BIN:-$repo/build/bin/sluice}
etcd_bin=${ETCD_BIN:-/usr/bin/etcd}
etcdctl_bin=${ETCDCTL_BIN:-/usr/bin/etcdctl}
session_timeout_ms=${SESSION_TIMEOUT_MS:-4000}
etcd_client_ports=(2379 2381 2383)
etcd_peer_ports=(2380 2382 2384)
first_broker_port=9092
first_metrics_port=9644
max_brokers=9

usage() {
  echo "usage: $0 N [start|stop|status]   (N brokers, 1 to $max_brokers)" >&2
  exit 2
}

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

n=""
action=start
case "${1:-}" in
  start | stop | status) action=$1 ;;
  '' | *[!0-9]*) usage ;;
  *)
    n=$1
    action=${2:-start}
    ;;
esac
case "$action" in start | stop | status) ;; *) usage ;; esac
if [ "$action" = start ]; then
  [ -n "$n" ] || usage
  if [ "$n" -lt 1 ] || [ "$n" -gt "$max_brokers" ]; then usage; fi
fi

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

etcd_endpoints=$(printf 'http://127.0.0.1:%s,' "${etcd_client_ports[@]}")
etcd_endpoints=${etcd_endpoints%,}

# True if the pid in pid file $1 is alive and runs the program $2.
pid_alive() {
  local pidfile=$1 prog=$2 pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$prog"
}

# True if something on 127.0.0.1 accepts connections on port $1.
listening() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Stops the process of pid file $1 (program $2): SIGTERM, then SIGKILL
# after 30 s. Removes the pid file.
stop_pidfile() {
  local pidfile=$1 prog=$2 what=$3 pid i
  if ! pid_alive "$pidfile" "$prog"; then
    if [ -f "$pidfile" ]; then echo "$what: not running"; fi
    rm -f "$pidfile"
    return 0
  fi
  pid=$(cat "$pidfile")
  # A paused (SIGSTOPped) process cannot act on SIGTERM until it continues.
  kill -CONT "$pid" 2>/dev/null || true
  kill -TERM "$pid"
  for ((i = 0; i < 300; i++)); do
    [ -d "/proc/$pid" ] || break
    sleep 0.1
  done
  if [ -d "/proc/$pid" ]; then
    echo "$what (pid $pid) did not stop within 30 s of SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  echo "$what (pid $pid) stopped"
  rm -f "$pidfile"
}

broker_pidfiles() {
  compgen -G "$dir/broker-*.pid" || true
}

do_stop() {
  local f id
  for f in $(broker_pidfiles | sort -r); do
    id=$(basename "$f" .pid)
    stop_pidfile "$f" "$sluice_bin" "$id"
  done
  for i in 2 1 0; do
    stop_pidfile "$dir/etcd-m$i.pid" "$etcd_bin" "etcd member m$i"
  done
  echo "Stopped. Data and logs are kept in $dir; remove it to start afresh."
}

# Metadata as kcat shows it, from the first broker that answers.
show_metadata() {
  local port
  command -v kcat >/dev/null || {
    echo "(install kcat to see the cluster's Metadata here)"
    return 0
  }
  for port in "$@"; do
    if listening "$port"; then
      kcat -L -b "127.0.0.1:$port" -m 5 2>&1 | sed -n '1,/topics:/p' || true
      return 0
    fi
  done
  echo "no broker answers"
}

do_status() {
  local i f id port ports=()
  for i in 0 1 2; do
    if pid_alive "$dir/etcd-m$i.pid" "$etcd_bin"; then
      echo "etcd member m$i: running, pid $(cat "$dir/etcd-m$i.pid"), client port ${etcd_client_ports[$i]}"
    else
      echo "etcd member m$i: not running"
    fi
  done
  for f in $(broker_pidfiles | sort); do
    id=${f##*/broker-}
    id=${id%.pid}
    port=$((first_broker_port + id - 1))
    ports+=("$port")
    if pid_alive "$f" "$sluice_bin"; then
      echo "broker $id: running, pid $(cat "$f"), 127.0.0.1:$port"
    else
      echo "broker $id: not running (log: $dir/broker-$id.log)"
    fi
  done
  [ ${#ports[@]} -gt 0 ] || {
    echo "no brokers recorded in $dir"
    return 0
  }
  show_metadata "${ports[@]}"
}

# On a failed start, stop what this run started and show why.
fail_start() {
  echo "cluster.sh: $*" >&2
  echo "Stopping what was started." >&2
  do_stop >&2 || true
  exit 1
}

do_start() {
  local i id port metrics_port log pidfile bootstrap="" initial_cluster="" state
  [ -x "$sluice_bin" ] || die "$sluice_bin is not built: run scripts/build.sh first"
  [ -x "$etcd_bin" ] || die "$etcd_bin not found: install the etcd-server package"
  [ -x "$etcdctl_bin" ] || die "$etcdctl_bin not found: install the etcd-client package"
  for f in "$dir"/etcd-m*.pid $(broker_pidfiles); do
    [ -f "$f" ] || continue
    if pid_alive "$f" "$etcd_bin" || pid_alive "$f" "$sluice_bin"; then
      die "a cluster from $dir already runs ($(basename "$f" .pid), pid $(cat "$f")): '$0 stop' first"
    fi
    rm -f "$f"
  done
  for port in "${etcd_client_ports[@]}" "${etcd_peer_ports[@]}"; do
    if listening "$port"; then die "port $port is in use by another program; etcd needs it"; fi
  done
  for ((id = 1; id <= n; id++)); do
    for port in $((first_broker_port + id - 1)) $((first_metrics_port + id - 1)); do
      if listening "$port"; then die "port $port is in use by another program; broker $id needs it"; fi
    done
  done

  for i in 0 1 2; do
    initial_cluster+="m$i=http://127.0.0.1:${etcd_peer_ports[$i]},"
  done
  initial_cluster=${initial_cluster%,}
  for i in 0 1 2; do
    # A member with data from an earlier run rejoins its cluster; etcd
    # ignores the initial-cluster flags then.
    state=new
    if [ -d "$dir/etcd-m$i/member" ]; then state=existing; fi
    nohup "$etcd_bin" --name "m$i" --data-dir "$dir/etcd-m$i" \
      --listen-client-urls "http://127.0.0.1:${etcd_client_ports[$i]}" \
      --advertise-client-urls "http://127.0.0.1:${etcd_client_ports[$i]}" \
      --listen-peer-urls "http://127.0.0.1:${etcd_peer_ports[$i]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${etcd_peer_ports[$i]}" \
      --initial-cluster "$initial_cluster" --initial-cluster-state "$state" \
      --initial-cluster-token sluice-cluster --log-level warn \
      >>"$dir/etcd-m$i.log" 2>&1 </dev/null &
    echo $! >"$dir/etcd-m$i.pid"
  done
  echo -n "etcd: waiting for three healthy members "
  for i in 0 1 2; do
    for ((t = 0; t < 300; t++)); do
      if ETCDCTL_API=3 "$etcdctl_bin" --endpoints="http://127.0.0.1:${etcd_client_ports[$i]}" \
        --command-timeout=1s endpoint health >/dev/null 2>&1; then break; fi
      pid_alive "$dir/etcd-m$i.pid" "$etcd_bin" ||
        fail_start "etcd member m$i exited; its log, $dir/etcd-m$i.log, ends:$(echo; tail -n 20 "$dir/etcd-m$i.log")"
      sleep 0.1
    done
    [ "$t" -lt 300 ] || fail_start "etcd member m$i not healthy within 30 s (log: $dir/etcd-m$i.log)"
    echo -n "."
  done
  echo " ok ($etcd_endpoints)"

  for ((id = 1; id <= n; id++)); do
    port=$((first_broker_port + id - 1))
    metrics_port=$((first_metrics_port + id - 1))
    log=$dir/broker-$id.log
    pidfile=$dir/broker-$id.pid
    mkdir -p "$dir/broker-$id"
    nohup "$sluice_bin" serve --node.id "$id" \
      --listeners "PLAINTEXT://127.0.0.1:$port" \
      --log.dirs "$dir/broker-$id" \
      --sluice.metrics.listener "127.0.0.1:$metrics_port" \
      --sluice.etcd.endpoints "$etcd_endpoints" \
      --sluice.etcd.session.timeout.ms "$session_timeout_ms" \
      >>"$log" 2>&1 </dev/null &
    echo $! >"$pidfile"
    bootstrap+="127.0.0.1:$port,"
  done
  bootstrap=${bootstrap%,}
  for ((id = 1; id <= n; id++)); do
    port=$((first_broker_port + id - 1))
    echo -n "broker $id: waiting for 127.0.0.1:$port "
    for ((t = 0; t < 300; t++)); do
      listening "$port" && break
      pid_alive "$dir/broker-$id.pid" "$sluice_bin" ||
        fail_start "broker $id exited; its log, $dir/broker-$id.log, ends:$(echo; tail -n 20 "$dir/broker-$id.log")"
      sleep 0.1
    done
    [ "$t" -lt 300 ] || fail_start "broker $id did not listen on 127.0.0.1:$port within 30 s (log: $dir/broker-$id.log)"
    echo "ok (pid $(cat "$dir/broker-$id.pid"))"
  done

  if command -v kcat >/dev/null; then
    echo -n "waiting until Metadata lists $n brokers "
    for ((t = 0; t < 60; t++)); do
      [ "$(kcat -L -b "$bootstrap" -m 5 2>/dev/null | grep -c '^  broker [0-9]* at')" -eq "$n" ] && break
      sleep 0.5
    done
    if [ "$t" -lt 60 ]; then echo "ok"; else echo "not yet after 30 s; see '$0 status' and the logs in $dir"; fi
  fi

  echo
  echo "Sluice cluster of $n broker(s) running; data and logs in $dir"
  echo "  bootstrap: $bootstrap"
  echo "  etcd:      $etcd_endpoints"
  echo "  try:       kcat -L -b $bootstrap"
  echo "  status:    $0 $n status"
  echo "  stop:      $0 $n stop"
}

case "$action" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
esac
