#!/usr/bin/env bash
# A three-node MariaDB Galera Cluster on loopback ports: three mariadbd
# processes of Debian's mariadb-server with Debian's galera-4 provider,
# for the Galera tests (make ha) and for trying claimstore against
# multi-primary synchronous replication.
#
#   scripts/galera-cluster.sh start        # g1 bootstraps, g2 and g3 join; waits until all are Synced
#   scripts/galera-cluster.sh status       # per node: pid, port, wsrep_cluster_size, wsrep_local_state_comment
#   scripts/galera-cluster.sh wait         # wait until every running node is Synced in one cluster
#   scripts/galera-cluster.sh kill g2      # SIGKILL one node: a crash
#   scripts/galera-cluster.sh freeze g3    # SIGSTOP one node (thaw g3: SIGCONT): a hung server
#   scripts/galera-cluster.sh start g2     # start one node again: it rejoins (IST or SST)
#   scripts/galera-cluster.sh stop         # stop every node, keep the data
#   scripts/galera-cluster.sh clean        # stop and remove the data directory
#
# Ports, all on 127.0.0.1 (GALERA_PORT moves them all): SQL 14306-14308,
# group communication (gmcast) 14561-14563, IST 14571-14573, SST (rsync)
# 14581-14583. Data, sockets and logs live under $GALERA_DIR (default
# /tmp/claimstore-galera), owned by the mysql OS user, which runs every
# mariadbd. The user root@'%' has an empty password and the database test
# exists: loopback only, for tests. Clients connect to any node, e.g.
#   root@tcp(127.0.0.1:14306)/test?parseTime=true
#
# How long the others wait for a silent node before they drop it from
# the cluster, and the hard limit after which they pronounce it dead
# (Galera Cluster docs, "Galera Parameters": evs.suspect_timeout,
# evs.inactive_timeout; the second must exceed the first, and
# evs.install_timeout, PT15S, the second), and how often a node sends
# keepalives (evs.keepalive_period, which the provider requires below a
# third of evs.suspect_timeout). While they wait, no commit completes
# anywhere: a killed or frozen node stops the survivors' commits for
# about evs.suspect_timeout plus a second or so. The defaults here, PT2S,
# PT4S and PT0.5S, bring that pause under 5 s; Galera's own, PT5S, PT15S
# and PT1S, tolerate longer stalls of a live node (a loaded machine, a
# network hiccup) before it is dropped and must rejoin:
#   GALERA_SUSPECT_TIMEOUT=PT5S GALERA_INACTIVE_TIMEOUT=PT15S GALERA_KEEPALIVE_PERIOD=PT1S scripts/galera-cluster.sh start
#
# The settings Galera requires are set for every node (MariaDB Galera
# Cluster docs, "Configuring MariaDB Galera Cluster": binlog_format=ROW,
# InnoDB, innodb_autoinc_lock_mode=2, wsrep_provider,
# wsrep_cluster_address); wsrep_sst_method=rsync needs rsync.
set -euo pipefail

DIR=${GALERA_DIR:-/tmp/claimstore-galera}
BASE=${GALERA_PORT:-14306}
HOST=127.0.0.1
NODES=(g1 g2 g3)
PROVIDER=${GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}
MARIADBD=${GALERA_MARIADBD:-/usr/sbin/mariadbd}
SUSPECT=${GALERA_SUSPECT_TIMEOUT:-PT2S}
INACTIVE=${GALERA_INACTIVE_TIMEOUT:-PT4S}
KEEPALIVE=${GALERA_KEEPALIVE_PERIOD:-PT0.5S}

die() { echo "galera-cluster: $*" >&2; exit 1; }
idx() { # idx NAME -> 0..2
	case $1 in g1) echo 0 ;; g2) echo 1 ;; g3) echo 2 ;; *) die "unknown node $1 (g1, g2 or g3)" ;; esac
}
sql_port() { echo $((BASE + $(idx "$1"))); }
gcomm_port() { echo $((BASE + 255 + $(idx "$1"))); }
ist_port() { echo $((BASE + 265 + $(idx "$1"))); }
sst_port() { echo $((BASE + 275 + $(idx "$1"))); }
# The pid launch recorded: mariadbd writes its own pid file only once a
# joiner's state transfer is over.
pidof_node() { [ -f "$DIR/$1/launch.pid" ] && cat "$DIR/$1/launch.pid"; }
running() { local p; p=$(pidof_node "$1") && kill -0 "$p" 2>/dev/null; }
q() { # q NODE SQL: one value
	mariadb --protocol=socket -S "$DIR/$1/mariadbd.sock" -u root -N -B -e "$2" 2>/dev/null
}

install() {
	[ -x "$MARIADBD" ] || die "$MARIADBD missing: apt-get install -y mariadb-server"
	if [ ! -f "$PROVIDER" ] || ! command -v rsync >/dev/null; then
		[ "$(id -u)" = 0 ] || die "galera-4 or rsync missing: apt-get install -y galera-4 rsync (as root)"
		echo "installing galera-4 and rsync"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q galera-4 rsync >/dev/null ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q galera-4 rsync >/dev/null; } ||
			die "could not install galera-4 and rsync"
	fi
	id mysql >/dev/null 2>&1 || die "no mysql OS user (the mariadb-server package creates it)"
}

conf() { # conf NAME: writes the node's configuration
	local n=$1 addr=""
	for m in "${NODES[@]}"; do addr+="${addr:+,}$HOST:$(gcomm_port "$m")"; done
	mkdir -p "$DIR/$n/data"
	cat >"$DIR/$n/my.cnf" <<EOF
[mariadbd]
datadir=$DIR/$n/data
socket=$DIR/$n/mariadbd.sock
pid-file=$DIR/$n/mariadbd.pid
log-error=$DIR/$n/error.log
port=$(sql_port "$n")
bind-address=$HOST
skip-name-resolve
innodb_buffer_pool_size=64M
innodb_log_file_size=16M
innodb_flush_log_at_trx_commit=2
max_connections=300
binlog_format=ROW
default_storage_engine=InnoDB
# Every character, as the machine's own server stores them (MariaDB
# 10.11's built-in default, latin1, refuses 4-byte UTF-8).
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=$PROVIDER
wsrep_cluster_name=claimstore
wsrep_cluster_address=gcomm://$addr
wsrep_node_name=$n
wsrep_node_address=$HOST:$(gcomm_port "$n")
wsrep_node_incoming_address=$HOST:$(sql_port "$n")
wsrep_provider_options="gmcast.listen_addr=tcp://$HOST:$(gcomm_port "$n");ist.recv_addr=$HOST:$(ist_port "$n");gcache.size=64M;evs.keepalive_period=$KEEPALIVE;evs.suspect_timeout=$SUSPECT;evs.inactive_timeout=$INACTIVE"
wsrep_sst_method=rsync
wsrep_sst_receive_address=$HOST:$(sst_port "$n")
EOF
	chown -R mysql:mysql "$DIR/$n"
}

# init_data creates a node's system tables (the bootstrap node only:
# joiners get theirs by SST).
init_data() {
	local n=$1
	[ -d "$DIR/$n/data/mysql" ] && return 0
	mariadb-install-db --defaults-file="$DIR/$n/my.cnf" --user=mysql --auth-root-authentication-method=normal \
		>"$DIR/$n/install.log" 2>&1 || die "mariadb-install-db for $n failed: see $DIR/$n/install.log"
}

# launch starts one node's mariadbd in the background (extra flags after
# the name, e.g. --wsrep-new-cluster).
launch() {
	local n=$1
	shift
	running "$n" && return 0
	rm -f "$DIR/$n/mariadbd.pid"
	setsid "$MARIADBD" --defaults-file="$DIR/$n/my.cnf" --user=mysql "$@" </dev/null >>"$DIR/$n/stdout.log" 2>&1 &
	echo $! >"$DIR/$n/launch.pid"
}

# synced waits until node n answers and reports Synced in a cluster of
# at least want nodes.
synced() {
	local n=$1 want=$2 deadline=$((SECONDS + ${GALERA_WAIT:-300}))
	while [ $SECONDS -lt $deadline ]; do
		local size state
		size=$(q "$n" "SHOW STATUS LIKE 'wsrep_cluster_size'" | awk '{print $2}') || true
		state=$(q "$n" "SHOW STATUS LIKE 'wsrep_local_state_comment'" | awk '{print $2}') || true
		if [ "${state:-}" = Synced ] && [ "${size:-0}" -ge "$want" ]; then
			return 0
		fi
		running "$n" || { sleep 1; running "$n" || die "$n is not running: see $DIR/$n/error.log"; }
		sleep 1
	done
	die "$n not Synced in a cluster of $want within ${GALERA_WAIT:-300} s: see $DIR/$n/error.log"
}

start_all() {
	install
	for n in "${NODES[@]}"; do conf "$n"; done
	init_data g1
	if ! running g1 && ! running g2 && ! running g3; then
		# No node runs: g1 bootstraps a new cluster from its data (the
		# last node to stop is safe to bootstrap; g1 always stops last).
		sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$DIR/g1/data/grastate.dat" 2>/dev/null || true
		launch g1 --wsrep-new-cluster
	fi
	synced g1 1
	q g1 "CREATE USER IF NOT EXISTS 'root'@'%'; GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION; CREATE DATABASE IF NOT EXISTS test; ALTER DATABASE test CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci" ||
		die "could not create root@'%' and the database test on g1"
	# Joiners one at a time: each takes a state transfer from a donor.
	launch g2
	synced g2 2
	launch g3
	synced g3 3
	status
}

start_one() {
	local n=$1
	install
	conf "$n"
	launch "$n"
	local others=0
	for m in "${NODES[@]}"; do running "$m" && others=$((others + 1)); done
	synced "$n" "$others"
}

status() {
	for n in "${NODES[@]}"; do
		if running "$n"; then
			printf '%s pid %s port %s cluster_size %s state %s\n' "$n" "$(pidof_node "$n")" "$(sql_port "$n")" \
				"$(q "$n" "SHOW STATUS LIKE 'wsrep_cluster_size'" | awk '{print $2}')" \
				"$(q "$n" "SHOW STATUS LIKE 'wsrep_local_state_comment'" | awk '{print $2}')"
		else
			printf '%s down\n' "$n"
		fi
	done
}

wait_all() {
	local up=0
	for n in "${NODES[@]}"; do running "$n" && up=$((up + 1)); done
	[ $up -gt 0 ] || die "no node runs"
	for n in "${NODES[@]}"; do running "$n" && synced "$n" "$up"; done
	return 0
}

stop_one() { # graceful: SIGTERM, then wait
	local n=$1 p
	p=$(pidof_node "$n") || return 0
	kill -CONT "$p" 2>/dev/null || true
	kill -TERM "$p" 2>/dev/null || return 0
	for _ in $(seq 1 120); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.5; done
	kill -KILL "$p" 2>/dev/null || true
}

stop_all() {
	# g1 last, so that it is the safe node to bootstrap from.
	stop_one g3
	stop_one g2
	stop_one g1
}

case ${1:-} in
start) if [ -n "${2:-}" ]; then start_one "$2"; else start_all; fi ;;
status) status ;;
wait) wait_all ;;
kill) p=$(pidof_node "${2:?node}") && kill -KILL "$p" ;;
freeze) p=$(pidof_node "${2:?node}") && kill -STOP "$p" ;;
thaw) p=$(pidof_node "${2:?node}") && kill -CONT "$p" ;;
stop) if [ -n "${2:-}" ]; then stop_one "$2"; else stop_all; fi ;;
clean) stop_all; rm -rf "$DIR" ;;
*) sed -n '2,41p' "$0"; exit 2 ;;
esac
