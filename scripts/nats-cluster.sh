#!/usr/bin/env bash
# A three-node NATS JetStream cluster on loopback ports, for trying the
# outbox relay against a replicated stream by hand. The failover test
# (make ha) starts its own nodes with the same layout; stop this cluster
# before running it.
#
#   scripts/nats-cluster.sh start    # nodes n1..n3, data under $NATS_HA_DIR
#   scripts/nats-cluster.sh status   # pid, client URL and JetStream state per node
#   scripts/nats-cluster.sh kill n2  # SIGKILL one node (start brings it back)
#   scripts/nats-cluster.sh pause n3 / resume n3   # SIGSTOP / SIGCONT: a partition
#   scripts/nats-cluster.sh stop     # stop every node, keep the data
#   scripts/nats-cluster.sh clean    # stop and remove the data directory
#
# Ports: client 14222-14224, routes 16222-16224, monitoring 18222-18224,
# all on 127.0.0.1. Clients connect with all three URLs:
#   nats://127.0.0.1:14222,nats://127.0.0.1:14223,nats://127.0.0.1:14224
# Create the stream with three replicas and a duplicate window at least
# the relay's retry horizon (docs/operations.md, "Sizing the duplicate
# window"), e.g. with the nats CLI:
#   nats stream add ORDERS --subjects 'orders.>' --replicas 3 --storage file --dupe-window 25m --defaults
set -euo pipefail

BIN=${NATS_SERVER:-/usr/sbin/nats-server}
DIR=${NATS_HA_DIR:-${TMPDIR:-/tmp}/claimstore-nats-cluster}
HOST=127.0.0.1
NODES=(n1 n2 n3)

die() { echo "nats-cluster: $*" >&2; exit 1; }
idx() { # idx NAME -> 0..2
	case $1 in n1) echo 0 ;; n2) echo 1 ;; n3) echo 2 ;; *) die "unknown node $1 (n1, n2 or n3)" ;; esac
}
pidof_node() { [ -f "$DIR/$1/pid" ] && cat "$DIR/$1/pid"; }
running() { local p; p=$(pidof_node "$1") && kill -0 "$p" 2>/dev/null; }

conf() { # conf NAME: writes the node's configuration
	local n=$1 i routes
	i=$(idx "$n")
	routes="nats-route://$HOST:16222, nats-route://$HOST:16223, nats-route://$HOST:16224"
	mkdir -p "$DIR/$n/jetstream"
	cat >"$DIR/$n/nats.conf" <<EOF
server_name: $n
listen: "$HOST:$((14222 + i))"
http: "$HOST:$((18222 + i))"
jetstream {
  store_dir: "$DIR/$n/jetstream"
}
cluster {
  name: claimstore-ha
  listen: "$HOST:$((16222 + i))"
  routes: [$routes]
}
EOF
}

start_node() {
	local n=$1 i
	i=$(idx "$n")
	if running "$n"; then echo "$n already running (pid $(pidof_node "$n"))"; return; fi
	conf "$n"
	"$BIN" -c "$DIR/$n/nats.conf" >>"$DIR/$n/nats.log" 2>&1 &
	echo $! >"$DIR/$n/pid"
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/$HOST/$((14222 + i))") 2>/dev/null; then
			echo "$n started (pid $!, nats://$HOST:$((14222 + i)), log $DIR/$n/nats.log)"
			return
		fi
		sleep 0.1
	done
	die "$n did not listen on $HOST:$((14222 + i)); see $DIR/$n/nats.log"
}

signal_node() { # signal_node SIGNAL NAME
	local p
	p=$(pidof_node "$2") || die "$2 has no pid file"
	kill "-$1" "$p"
}

cmd=${1:-}
case $cmd in
start)
	[ -x "$BIN" ] || die "$BIN not found (apt-get install nats-server, or set NATS_SERVER)"
	mkdir -p "$DIR"
	if [ $# -ge 2 ]; then start_node "$2"; else for n in "${NODES[@]}"; do start_node "$n"; done; fi
	;;
status)
	for n in "${NODES[@]}"; do
		i=$(idx "$n")
		if running "$n"; then
			state=$(ps -o stat= -p "$(pidof_node "$n")" | tr -d ' ')
			echo "$n pid $(pidof_node "$n") state $state nats://$HOST:$((14222 + i))"
			[ "${state:0:1}" = T ] || curl -s --max-time 1 "http://$HOST:$((18222 + i))/jsz" | grep -E '"(streams|messages|meta_cluster|leader)"' | sed 's/^/    /' || true
		else
			echo "$n not running"
		fi
	done
	;;
kill)
	signal_node KILL "${2:?node}"
	for _ in $(seq 50); do running "$2" || break; sleep 0.1; done
	rm -f "$DIR/$2/pid"
	echo "$2 killed"
	;;
pause) signal_node STOP "${2:?node}" ;;
resume) signal_node CONT "${2:?node}" ;;
stop | clean)
	for n in "${NODES[@]}"; do
		if running "$n"; then
			p=$(pidof_node "$n")
			kill -CONT "$p" 2>/dev/null || true
			kill -TERM "$p"
			for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
			kill -0 "$p" 2>/dev/null && kill -KILL "$p"
			echo "$n stopped"
		fi
		rm -f "$DIR/$n/pid"
	done
	if [ "$cmd" = clean ]; then rm -rf "$DIR" && echo "removed $DIR"; fi
	;;
*) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
