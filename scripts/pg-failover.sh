#!/usr/bin/env bash
# A pg_auto_failover formation on loopback ports: a monitor, a primary and a
# synchronous secondary of PostgreSQL 15, for the failover test (make ha)
# and for trying claimstore against a primary that moves.
#
#   scripts/pg-failover.sh start          # monitor, node1, node2; waits for primary + secondary
#   scripts/pg-failover.sh status         # each node's state as the monitor sees it
#   scripts/pg-failover.sh primary        # prints the writable node (primary or wait_primary)
#   scripts/pg-failover.sh stop node1     # immediate stop of one node's keeper and server
#   scripts/pg-failover.sh kill node1     # SIGKILL to one node's keeper, server and backends: a crash
#   scripts/pg-failover.sh start node1    # start one node again (it rejoins as secondary)
#   scripts/pg-failover.sh wait           # wait until one node is primary and one secondary
#   scripts/pg-failover.sh stop           # stop every node and the monitor, keep the data
#   scripts/pg-failover.sh clean          # stop and remove the data directory
#
# Ports, all on 127.0.0.1: monitor 15500, node1 15501, node2 15502
# (PGAF_PORT moves the three). Data, configuration and logs live under
# $PGAF_DIR (default /tmp/claimstore-pgaf), owned by the postgres OS user,
# which runs every pg_autoctl process (pg_autoctl refuses root). Trust
# authentication and no TLS: loopback only, for tests. The script installs
# the Debian package postgresql-15-auto-failover when pg_autoctl is missing
# (needs root). The database "test" is created on the primary. Clients
# connect to whichever node is primary with:
#   postgres://postgres@127.0.0.1:15501,127.0.0.1:15502/test?target_session_attrs=read-write&sslmode=disable
#
# The monitor checks the nodes every second and declares a node unhealthy
# after 5 s without an answer (pg_auto_failover's defaults are 5 s and
# 20 s); PGAF_DEFAULT_TIMEOUTS=1 keeps the defaults.
set -euo pipefail

DIR=${PGAF_DIR:-/tmp/claimstore-pgaf}
PORT=${PGAF_PORT:-15500}
HOST=127.0.0.1
PGBIN=${PGAF_PGBIN:-/usr/lib/postgresql/15/bin}
NODES=(node1 node2)
MONITOR_URI="postgres://autoctl_node@$HOST:$PORT/pg_auto_failover?sslmode=disable"

die() { echo "pg-failover: $*" >&2; exit 1; }
port_of() { # port_of monitor|node1|node2
	case $1 in monitor) echo "$PORT" ;; node1) echo $((PORT + 1)) ;; node2) echo $((PORT + 2)) ;; *) die "unknown node $1 (node1 or node2)" ;; esac
}

# as_pg runs a command as the postgres user with the formation's own
# configuration and state directories, so that clean removes everything.
as_pg() {
	runuser -u postgres -- env PATH="$PGBIN:$PATH" XDG_CONFIG_HOME="$DIR/config" XDG_DATA_HOME="$DIR/share" \
		XDG_RUNTIME_DIR="$DIR/run" PG_CONFIG="$PGBIN/pg_config" "$@"
}

install() {
	if ! command -v pg_autoctl >/dev/null || [ ! -x "$PGBIN/pg_ctl" ]; then
		[ "$(id -u)" = 0 ] || die "pg_autoctl missing: apt-get install -y postgresql-15-auto-failover (as root)"
		echo "installing postgresql-15-auto-failover"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-15-auto-failover >/dev/null ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-15-auto-failover >/dev/null; } ||
			die "could not install postgresql-15-auto-failover"
	fi
	id postgres >/dev/null 2>&1 || die "no postgres OS user (the postgresql package creates it)"
}

# running NAME: the keeper of NAME (or the monitor) is alive.
running() {
	local pidf="$DIR/run/pg_autoctl$DIR/$1/pg_autoctl.pid" p
	[ -f "$pidf" ] || return 1
	p=$(head -1 "$pidf")
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null
}

listening() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

wait_listening() { # wait_listening NAME SECONDS
	local p i
	p=$(port_of "$1")
	for ((i = 0; i < $2 * 10; i++)); do
		listening "$p" && return 0
		sleep 0.1
	done
	die "$1 not listening on $HOST:$p after $2 s; see $DIR/$1.log"
}

# run_keeper NAME: the pg_autoctl service of NAME in the background, its
# output appended to $DIR/NAME.log.
run_keeper() {
	as_pg setsid pg_autoctl run --pgdata "$DIR/$1" >>"$DIR/$1.log" 2>&1 </dev/null &
}

# create NAME ARGS...: pg_autoctl create ARGS in a session of its own,
# whose pid is kept in $DIR/NAME.create.pid until it ends, so that stop can
# end a creation cut short (a killed test).
create() {
	local n=$1 rc=0
	shift
	as_pg setsid pg_autoctl create "$@" >>"$DIR/$n.log" 2>&1 </dev/null &
	echo $! >"$DIR/$n.create.pid"
	wait $! || rc=$?
	rm -f "$DIR/$n.create.pid"
	return "$rc"
}

# end_create NAME: ends a creation of NAME still running (its session).
end_create() {
	local r p
	[ -f "$DIR/$1.create.pid" ] || return 0
	r=$(cat "$DIR/$1.create.pid")
	if kill -0 "$r" 2>/dev/null; then
		for p in $(ps -o pid= --ppid "$r"); do kill -KILL -- "-$p" 2>/dev/null || true; done
		kill -KILL "$r" 2>/dev/null || true
		echo "$1: creation ended"
	fi
	rm -f "$DIR/$1.create.pid"
}

mon_sql() { # mon_sql SQL: one query on the monitor's database, unaligned
	as_pg psql -X -q -At -h "$HOST" -p "$PORT" -U autoctl_node -d pg_auto_failover -c "$1"
}

start_monitor() {
	if running monitor; then echo "monitor already running"; return; fi
	if [ ! -f "$DIR/config/pg_autoctl$DIR/monitor/pg_autoctl.cfg" ]; then
		rm -rf "${DIR:?}/monitor"
		create monitor monitor --pgdata "$DIR/monitor" --pgport "$PORT" --hostname "$HOST" --listen "$HOST" \
			--auth trust --no-ssl --pgctl "$PGBIN/pg_ctl" || die "create monitor failed; see $DIR/monitor.log"
	fi
	run_keeper monitor
	wait_listening monitor 60
	for _ in $(seq 100); do mon_sql 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
	if [ "${PGAF_DEFAULT_TIMEOUTS:-0}" != 1 ]; then
		as_pg psql -X -q -h "$HOST" -p "$PORT" -d pg_auto_failover >/dev/null <<-'EOF'
			ALTER SYSTEM SET pgautofailover.health_check_period = 1000;
			ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000;
			ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1;
			ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500;
			ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 5000;
			SELECT pg_reload_conf();
		EOF
	fi
	echo "monitor running on $HOST:$PORT (log $DIR/monitor.log)"
}

start_node() {
	local n=$1 p
	p=$(port_of "$n")
	if running "$n"; then echo "$n already running"; return; fi
	if [ ! -f "$DIR/$n/PG_VERSION" ] || [ ! -f "$DIR/config/pg_autoctl$DIR/$n/pg_autoctl.cfg" ]; then
		# A node whose creation did not finish starts over.
		rm -rf "${DIR:?}/$n" "$DIR/config/pg_autoctl$DIR/$n" "$DIR/share/pg_autoctl$DIR/$n"
		create "$n" postgres --pgdata "$DIR/$n" --pgport "$p" --pghost "$HOST" --listen "$HOST" \
			--hostname "$HOST" --name "$n" --dbname test --username postgres --auth trust --no-ssl \
			--monitor "$MONITOR_URI" --pgctl "$PGBIN/pg_ctl" ||
			die "create $n failed; see $DIR/$n.log"
	fi
	run_keeper "$n"
	echo "$n started on $HOST:$p (log $DIR/$n.log)"
}

stop_one() { # stop_one NAME [--immediate]: stops the keeper and its server
	local n=$1 mode=${2:---fast}
	if running "$n"; then
		as_pg pg_autoctl stop --pgdata "$DIR/$n" "$mode" >/dev/null 2>&1 || true
		for _ in $(seq 300); do running "$n" || break; sleep 0.1; done
		running "$n" && die "$n did not stop; see $DIR/$n.log"
	fi
	# A server left behind by a keeper that died.
	if [ -f "$DIR/$n/postmaster.pid" ]; then
		as_pg pg_ctl stop -D "$DIR/$n" -m "${mode#--}" -w >/dev/null 2>&1 || true
	fi
	echo "$n stopped"
}

# kill_one NAME: SIGKILL to the keeper's processes, the postmaster and
# every server process (each runs in a session of its own), as a machine
# that lost power; the data directory needs crash recovery at its next
# start.
kill_one() {
	local n=$1 kp pm pids
	pids=""
	if running "$n"; then
		kp=$(head -1 "$DIR/run/pg_autoctl$DIR/$n/pg_autoctl.pid")
		pids=$(ps -o pid= -s "$kp" || true)
	fi
	if [ -f "$DIR/$n/postmaster.pid" ]; then
		pm=$(head -1 "$DIR/$n/postmaster.pid")
		if kill -0 "$pm" 2>/dev/null; then
			pids="$pids $pm $(ps -o pid= --ppid "$pm" || true)"
		fi
	fi
	# shellcheck disable=SC2086
	[ -n "${pids// /}" ] && kill -KILL $pids 2>/dev/null || true
	for _ in $(seq 100); do
		running "$n" || { [ -n "${pm:-}" ] && kill -0 "$pm" 2>/dev/null; } || break
		sleep 0.1
	done
	echo "$n killed"
}

# states prints "name reportedstate goalstate" per node.
states() { mon_sql 'select nodename, reportedstate, goalstate from pgautofailover.node order by nodeid' 2>/dev/null | tr '|' ' '; }

# wait_formation SECONDS: one node primary, the other secondary, both
# reported and assigned.
wait_formation() {
	local i s
	for ((i = 0; i < $1 * 5; i++)); do
		s=$(states || true)
		if [ "$(grep -c '^node[12] primary primary$' <<<"$s")" = 1 ] &&
			[ "$(grep -c '^node[12] secondary secondary$' <<<"$s")" = 1 ]; then
			return 0
		fi
		sleep 0.2
	done
	echo "$s" >&2
	die "no primary and secondary after $1 s; see $DIR/*.log"
}

primary() { states | awk '($2 == "primary" || $2 == "wait_primary") && $2 == $3 { print $1 }'; }

cmd=${1:-}
case $cmd in
start)
	install
	mkdir -p "$DIR/run" "$DIR/config" "$DIR/share"
	chown postgres:postgres "$DIR" "$DIR/run" "$DIR/config" "$DIR/share"
	chmod 700 "$DIR/run"
	if [ $# -ge 2 ]; then
		port_of "$2" >/dev/null
		start_node "$2"
		exit 0
	fi
	start_monitor
	start_node node1
	# node2 clones node1: node1 must be the single primary first.
	for _ in $(seq 300); do
		states | grep -q '^node1 single single$\|^node1 primary\|^node1 wait_primary' && break
		sleep 0.2
	done
	start_node node2
	wait_formation 180
	as_pg psql -X -q -h "$HOST" -p "$(port_of "$(primary)")" -d postgres -Atc "select 1 from pg_database where datname = 'test'" | grep -q 1 ||
		as_pg createdb -h "$HOST" -p "$(port_of "$(primary)")" test
	echo "formation ready: primary $(primary), secondary; database test"
	echo "DSN postgres://postgres@$HOST:$((PORT + 1)),$HOST:$((PORT + 2))/test?target_session_attrs=read-write&sslmode=disable"
	;;
wait) wait_formation "${2:-180}" && echo "primary $(primary)" ;;
primary) primary ;;
status)
	for n in monitor "${NODES[@]}"; do
		if running "$n"; then echo "$n running on $HOST:$(port_of "$n")"; else echo "$n not running"; fi
	done
	running monitor && states | sed 's/^/  /'
	;;
kill)
	port_of "${2:?node}" >/dev/null
	kill_one "$2"
	;;
stop | clean)
	if [ "$cmd" = stop ] && [ $# -ge 2 ]; then
		port_of "$2" >/dev/null
		stop_one "$2" --immediate
		exit 0
	fi
	[ -d "$DIR" ] || { echo "nothing under $DIR"; exit 0; }
	for n in "${NODES[@]}" monitor; do
		end_create "$n"
		if [ -d "$DIR/$n" ]; then stop_one "$n"; fi
	done
	if [ "$cmd" = clean ]; then rm -rf "$DIR" && echo "removed $DIR"; fi
	;;
*) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 2 ;;
esac
