# claimstore — the two set-up commands are `make demo` and `make test`.
GO       ?= go
GOBIN    := $(shell $(GO) env GOPATH)/bin
PKGS     := ./...

# Test timeouts are generous for a 2-core machine under -race. The race
# detector needs cgo (a C compiler, e.g. gcc); `make test RACE=` runs the
# tests without it, and so without cgo.
RACE       ?= -race
TEST_FLAGS ?= $(RACE) -count=1 -timeout 30m

# The library's targets build with its own go.mod alone (GOWORK=off), with
# the versions a user's build selects; the targets of the watermill and
# bench/peers modules build in the workspace of go.work ($(WORK)), against
# the library in this checkout.
export GOWORK := off
WORK     := GOWORK=$(CURDIR)/go.work

# The developers' tool: the operator's commands plus the benchmarks, the
# demos and the soak (tools/claimstore-dev); users build cmd/claimstore.
DEV      := ./tools/claimstore-dev

.PHONY: build-soaksub test demo demo-dispatch bench bench-dispatch bench-peers bench-watermill stress conformance ha soak lint check-deps cross-build up up-distributed down build build-dev

## build: the operator's tool, bin/claimstore; build-dev: the developers' tool,
## bin/claimstore-dev.
build:
	$(GO) build -o bin/claimstore ./cmd/claimstore
build-dev:
	$(GO) build -o bin/claimstore-dev $(DEV)

## test: every package of the library (and of tools/) against memory, SQLite
## and, when reachable, the local PostgreSQL and MySQL/MariaDB
## (CLAIMSTORE_REQUIRE=postgres,mysql makes them mandatory instead of
## skipped), with the race detector unless RACE= is given. Every 30 s
## (GOTEST_PROGRESS) it says on stderr which packages are still running;
## go test's output and exit status are unchanged.
test:
	GO=$(GO) .ci/gotest $(TEST_FLAGS) $(PKGS)

## demo: the main job on the embedded default (SQLite file, embedded NATS).
demo:
	$(GO) run $(DEV) demo

## demo-dispatch: three schedule worker processes through a SIGKILL and a SIGTERM
## on an SQLite file (BACKEND=postgres for the local server); prints the verdict.
demo-dispatch:
	$(GO) run $(DEV) demo dispatch $(if $(filter-out sqlite,$(BACKEND)),--backend $(BACKEND),)

## bench: claim benchmark with the raw-driver baselines; BACKEND=sqlite|postgres|mysql|mariadb|memory
BACKEND ?= sqlite
ROWS    ?= 200000
WORKERS ?= 8
BATCH   ?= 100
bench:
	$(GO) run $(DEV) bench --backend $(BACKEND) --rows $(ROWS) --workers $(WORKERS) --batch $(BATCH) --baseline

## bench-dispatch: the schedule dispatcher: 200,000 once schedules due at once, fired by
## three worker processes, on the local PostgreSQL (BACKEND=sqlite|mysql|mariadb for
## another backend); prints fires/s, the fire lag and the verdict (duplicates, missed).
bench-dispatch:
	$(GO) run $(DEV) bench dispatch --backend $(if $(filter command line environment,$(origin BACKEND)),$(BACKEND),postgres)

## bench-peers: claimstore's claim next to River's job burn-down and Watermill-sql's
## pub/sub on the local PostgreSQL (module bench/peers, kept out of the library's
## dependencies); PEERS_ROWS rows, jobs and messages each, PEERS_ROUNDS rounds
## interleaved, PEERS_FLAGS for more (--dsn, --json FILE, --river-max-workers).
PEERS_ROWS   ?= 100000
PEERS_ROUNDS ?= 1
PEERS_FLAGS  ?=
bench-peers:
	cd bench/peers && $(WORK) $(GO) run . --rows $(ROWS) --workers $(WORKERS) --batch $(BATCH) --rounds $(PEERS_ROUNDS) $(PEERS_FLAGS)

## bench-watermill: claimstore's Watermill Publisher and Subscriber beside watermill-sql
## on the local PostgreSQL (module watermill): publish msg/s, consume msg/s with 1 and
## WORKERS subscribers of one group, PEERS_ROWS messages per phase, PEERS_ROUNDS rounds.
bench-watermill:
	cd watermill && $(WORK) $(GO) run ./bench -rows $(PEERS_ROWS) -subscribers $(WORKERS) -batch $(BATCH) -rounds $(PEERS_ROUNDS)

## stress: the no-double-claim check with several OS processes per backend.
stress:
	CLAIMSTORE_STRESS=1 $(GO) test -race=false -count=1 -timeout 60m -run 'Stress' -v ./adapters/... ./conformance/...

## conformance: the whole suite against one database.
##   make conformance DB=postgres|mysql|mariadb|sqlite|sqlserver|cockroach|yugabyte|elasticsearch|memory DSN=...
## DB=cockroach and DB=yugabyte default to the compose services of `make up-distributed`.
DB  ?= sqlite
DSN ?=
conformance:
	CLAIMSTORE_CONFORMANCE_DB=$(DB) CLAIMSTORE_CONFORMANCE_DSN='$(DSN)' \
		$(GO) test -count=1 -timeout 30m -v -run 'TestConformanceTool' ./conformance/tool/

## ha: the multi-server failure tests on loopback ports (tools/internal/hatest): a
## three-node nats-server JetStream cluster (127.0.0.1:14222-14224) whose
## stream leader is killed and a follower frozen while an outbox relay on the
## local PostgreSQL publishes; a pg_auto_failover formation
## (scripts/pg-failover.sh: monitor 127.0.0.1:15500, nodes 15501-15502, run as
## the postgres user; installs postgresql-15-auto-failover when missing) whose
## primary is killed during a claim burn-down and during an outbox relay run;
## a MariaDB Galera Cluster (scripts/galera-cluster.sh: nodes 127.0.0.1:14306-14308,
## run as the mysql user; installs galera-4 and rsync when missing) with the
## try-lock, a claim burn-down, leases and fencing, unique job inserts and an
## outbox relay through all three nodes, a node killed or frozen mid-run.
## HA_RUN narrows the tests (HA_RUN=TestPostgresFailover, HA_RUN=TestJetStream, HA_RUN=TestGalera),
## HA_TIMEOUT bounds the run (the Galera conformance suite takes tens of minutes),
## HA_MESSAGES sets the messages per run, HA_ROWS the burn-down's rows,
## NATS_SERVER the nats-server binary.
HA_RUN      ?= .
HA_TIMEOUT  ?= 60m
HA_MESSAGES ?= 20000
HA_ROWS     ?= 20000
NATS_SERVER ?= /usr/sbin/nats-server
ha:
	CLAIMSTORE_HA=1 CLAIMSTORE_REQUIRE=postgres CLAIMSTORE_HA_MESSAGES=$(HA_MESSAGES) CLAIMSTORE_HA_ROWS=$(HA_ROWS) CLAIMSTORE_NATS_SERVER=$(NATS_SERVER) \
		$(GO) test -race -count=1 -timeout $(HA_TIMEOUT) -run '$(HA_RUN)' -v ./tools/internal/hatest/...

## soak: the chaos soak (tools/internal/soak, `claimstore-dev soak`): producers, dispatch workers
## with an elected maintenance leader and a job queue client, outbox relays and (on the
## backends of SOAK_WATERMILL) Watermill subscribers of one consumer group
## (bin/claimstore-soaksub) as OS processes, through a
## seeded schedule of SIGKILL, SIGSTOP, terminated database connections and NATS node
## restarts (a three-node nats-server cluster on 127.0.0.1:14322-14324, routes
## 16322-16324, monitoring 18322-18324), then the history checker. SOAK of load on
## each of SOAK_BACKENDS in turn (plus the drain and the check, under a minute);
## SOAK_FLAGS for more (--seed N replays a fault schedule). Exits non-zero on any
## violation, printing the seed.
SOAK          ?= 10m
SOAK_BACKENDS ?= postgres mariadb
SOAK_FLAGS    ?=
# SOAK_WATERMILL: the backends whose runs include the Watermill subscribers
# (SOAK_WATERMILL= runs none).
SOAK_WATERMILL ?= postgres mariadb
soak: build-dev build-soaksub
	@set -e; for b in $(SOAK_BACKENDS); do \
		echo "== soak on $$b for $(SOAK)"; \
		sub=; case " $(SOAK_WATERMILL) " in *" $$b "*) sub="--subscriber-command bin/claimstore-soaksub";; esac; \
		bin/claimstore-dev soak --backend $$b --duration $(SOAK) --nats-server $(NATS_SERVER) $$sub $(SOAK_FLAGS); \
	done

## build-soaksub: the soak's Watermill subscriber, bin/claimstore-soaksub, built
## from the watermill module (watermill/internal/soaksub) in the workspace.
build-soaksub:
	cd watermill && $(WORK) $(GO) build -o ../bin/claimstore-soaksub ./internal/soaksub

## check-deps: fails when a binary or library links code it must not:
## `go list -deps ./cmd/claimstore` must not name testing, a test helper package
## (internal/testutil, sqlstoretest) or tools/, and no library package (every
## package but commands, tools, examples, the command's tree internal/cmd, the
## test trees internal/testutil, conformance, sqlstoretest, jobstest and
## fakees) may link testing, internal/cmd, internal/testutil or tools/.
check-deps:
	@bad=$$($(GO) list -deps ./cmd/claimstore | grep -Ex 'testing|.*/sqlstoretest|github.com/claimstore/claimstore/(internal/testutil|tools)/.*'); \
	if [ -n "$$bad" ]; then echo "cmd/claimstore links test code:"; echo "$$bad"; exit 1; fi
	@lib=$$($(GO) list ./... | grep -vE '/(tools|cmd|examples)/|/internal/(cmd|testutil)/|/(sqlstoretest|jobstest|fakees)$$|/conformance(/|$$)'); \
	bad=$$($(GO) list -deps $$lib | grep -Ex 'testing|github.com/claimstore/claimstore/(internal/(cmd|testutil)|tools)/.*'); \
	if [ -n "$$bad" ]; then echo "a library package links the command's or the tests' code:"; echo "$$bad"; exit 1; fi

## cross-build: builds every package of the three modules and cmd/claimstore for
## GOOS and GOARCH (make cross-build GOOS=windows GOARCH=amd64), discarding the
## binaries.
cross-build:
	$(GO) build -o /dev/null ./...
	$(GO) build -o /dev/null ./cmd/claimstore
	cd watermill && $(WORK) $(GO) build -o /dev/null ./...
	cd bench/peers && $(WORK) $(GO) build -o /dev/null ./...

## lint: gofmt, go vet and staticcheck, of the library and of the bench/peers and
## watermill modules.
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1; }
	$(GO) vet $(PKGS)
	cd bench/peers && $(WORK) $(GO) vet ./...
	cd watermill && $(WORK) $(GO) vet ./...
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest
	$(GOBIN)/staticcheck $(PKGS)
	cd bench/peers && $(WORK) $(GOBIN)/staticcheck ./...
	cd watermill && $(WORK) $(GOBIN)/staticcheck ./...

## up/down: the full database matrix with Docker Compose.
up:
	docker compose up -d --wait
down:
	docker compose --profile distributed down -v

## up-distributed: CockroachDB (READ COMMITTED enabled by a one-shot init) and
## YugabyteDB (yb_enable_read_committed_isolation=true); not part of `up` or CI.
up-distributed:
	docker compose --profile distributed run --rm cockroachdb-init
	docker compose --profile distributed up -d --wait yugabytedb
