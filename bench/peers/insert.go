package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// insertBatch is the rows one insert call of the insert phases writes.
const insertBatch = 1000

// runAddMany times dispatch.Schedules.AddMany writing cfg.Rows once
// schedules, insertBatch per call, from one goroutine, into a fresh
// schedule table, then checks every key is stored once. The table is
// dropped before it returns.
func runAddMany(ctx context.Context, cfg Config) (res Result, err error) {
	res = Result{System: "addmany", Unit: "once schedule inserted by Schedules.AddMany (ON CONFLICT DO NOTHING)", Rows: cfg.Rows, Workers: 1}
	var c counter
	db, closeDB, err := openGorm(ctx, cfg.DSN, 2, &c)
	if err != nil {
		return res, err
	}
	defer closeDB()
	name := "peers_sched_" + suffix()
	defer dropTable(ctx, db, name, &err)
	if err := dispatch.MigrateSchedules(ctx, db, name); err != nil {
		return res, fmt.Errorf("peers: addmany: %w", err)
	}
	store, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(name))
	if err != nil {
		return res, fmt.Errorf("peers: addmany: %w", err)
	}
	sc, err := dispatch.NewSchedules(store, dispatch.SchedulesConfig{})
	if err != nil {
		return res, fmt.Errorf("peers: addmany: %w", err)
	}
	at := time.Now().Add(time.Hour)
	specs := make([]dispatch.Spec, cfg.Rows)
	for i := range specs {
		specs[i] = dispatch.Spec{Key: "s" + strconv.Itoa(i+1), At: at}
	}
	before := c.n.Load()
	timer := startTimer()
	for first := 0; first < cfg.Rows; first += insertBatch {
		n, err := sc.AddMany(ctx, specs[first:min(first+insertBatch, cfg.Rows)])
		if err != nil {
			return res, fmt.Errorf("peers: addmany: %w", err)
		}
		res.Done += n
	}
	timer.stop(&res)
	res.Statements = c.n.Load() - before
	stored, err := store.Count(ctx, dao.Criteria{})
	if err != nil {
		return res, fmt.Errorf("peers: addmany: count: %w", err)
	}
	if stored != int64(cfg.Rows) || res.Done != cfg.Rows {
		res.Lost = cfg.Rows - int(stored)
		return res, fmt.Errorf("peers: addmany: %d created, %d stored, want %d", res.Done, stored, cfg.Rows)
	}
	return res, nil
}

// runRiverInsert times River's InsertManyFast (COPY FROM) writing cfg.Rows
// jobs, insertBatch per call, from one goroutine, into a fresh River
// schema, then checks the count. The schema is dropped before it returns.
func runRiverInsert(ctx context.Context, cfg Config) (res Result, err error) {
	res = Result{System: "river-insert", Unit: "job inserted by River's InsertManyFast (COPY FROM)", Rows: cfg.Rows, Workers: 1}
	var c counter
	pool, err := openPool(ctx, cfg.DSN, 2, &c)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	schema, driver, drop, err := riverSchema(ctx, pool, "river-insert")
	defer drop(&err)
	if err != nil {
		return res, err
	}
	client, err := river.NewClient(driver, &river.Config{Schema: schema, Logger: quietLogger()})
	if err != nil {
		return res, fmt.Errorf("peers: river-insert: client: %w", err)
	}
	params := make([]river.InsertManyParams, cfg.Rows)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{Seq: int64(i + 1)}}
	}
	before := c.n.Load()
	timer := startTimer()
	for first := 0; first < cfg.Rows; first += insertBatch {
		n, err := client.InsertManyFast(ctx, params[first:min(first+insertBatch, cfg.Rows)])
		if err != nil {
			return res, fmt.Errorf("peers: river-insert: %w", err)
		}
		res.Done += n
	}
	timer.stop(&res)
	res.Statements = c.n.Load() - before
	var stored int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "river_job"}.Sanitize()).Scan(&stored); err != nil {
		return res, fmt.Errorf("peers: river-insert: count: %w", err)
	}
	if stored != cfg.Rows || res.Done != cfg.Rows {
		res.Lost = cfg.Rows - stored
		return res, fmt.Errorf("peers: river-insert: %d inserted, %d stored, want %d", res.Done, stored, cfg.Rows)
	}
	return res, nil
}
