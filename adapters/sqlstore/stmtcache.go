package sqlstore

import (
	"context"
	"database/sql"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"gorm.io/gorm"
)

// stmtCacheSize is the most prepared statements a store keeps on SQLite:
// a job queue's claim and outcome statements differ by the number of ids
// and kinds they bind, a few dozen texts in all.
const stmtCacheSize = 128

// stmtCache keeps a store's hot statements prepared, on SQLite, whose
// driver (github.com/ncruces/go-sqlite3) prepares, runs and finalizes a
// statement anew for each query with arguments: parsing and planning the
// claim statement was 40% of a claim's CPU time in the job cycle. Each
// entry is a statement of the store's database (sql.DB.PrepareContext),
// which database/sql prepares once on each connection that runs it and
// finalizes when the connection closes or the entry is evicted (least
// recently used first, by golang-lru) and no query is starting on it.
// SQLite prepares such a statement again by itself when the schema
// changed ("sqlite3_prepare_v2", SQLITE_SCHEMA). It is safe for
// concurrent use.
type stmtCache struct {
	db    *sql.DB
	stmts *lru.Cache[string, *cachedStmt]
}

// cachedStmt is an entry of stmtCache: a statement, how many queries are
// starting on it, and whether it was evicted. An evicted statement is
// closed once no query is starting on it; a query already started keeps
// its rows, which database/sql reads from the connection's own copy of
// the statement, finalized when the connection is released.
type cachedStmt struct {
	st      *sql.Stmt
	mu      sync.Mutex
	users   int
	evicted bool
}

// acquire reports whether e can start a query (not evicted), counting
// it; the caller calls release once its query started.
func (e *cachedStmt) acquire() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.evicted {
		return false
	}
	e.users++
	return true
}

func (e *cachedStmt) release() {
	e.mu.Lock()
	e.users--
	closing := e.evicted && e.users == 0
	e.mu.Unlock()
	if closing {
		e.st.Close()
	}
}

func (e *cachedStmt) evict() {
	e.mu.Lock()
	e.evicted = true
	closing := e.users == 0
	e.mu.Unlock()
	if closing {
		e.st.Close()
	}
}

// newStmtCache returns the statement cache of db, of at most size
// statements.
func newStmtCache(db *sql.DB, size int) *stmtCache {
	stmts, err := lru.NewWithEvict(size, func(_ string, e *cachedStmt) { e.evict() })
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &stmtCache{db: db, stmts: stmts}
}

// cached returns the cached statement of query, acquired (see
// cachedStmt.acquire); nil when it is not cached.
func (c *stmtCache) cached(query string) *cachedStmt {
	if e, ok := c.stmts.Get(query); ok && e.acquire() {
		return e
	}
	return nil
}

// prepare caches query's statement, preparing it on the database when it
// is not cached, and returns it acquired (see cachedStmt.acquire); nil
// when the database refuses it (the caller then runs query as it is,
// which reports the error, or finds a stale schema and reads it again),
// and on a nil cache. It takes a connection from the pool for a prepare:
// it is not to be called while the caller holds the pool's last
// connection.
func (c *stmtCache) prepare(ctx context.Context, query string) *cachedStmt {
	if c == nil {
		return nil
	}
	if e := c.cached(query); e != nil {
		return e
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	e := &cachedStmt{st: st, users: 1}
	if prev, ok, _ := c.stmts.PeekOrAdd(query, e); ok {
		// Another caller cached it meanwhile.
		st.Close()
		if prev.acquire() {
			return prev
		}
		return nil
	}
	return e
}

// pool returns p with its queries running the statements of c: on the
// database c caches for, a statement prepared when missing; in one of its
// transactions, a cached one (none is prepared: the transaction holds a
// connection, and a prepare on the database may wait for another).
// Statements not cached run as they are; on any other pool, all do.
func (c *stmtCache) pool(p gorm.ConnPool) gorm.ConnPool {
	if c == nil {
		return p
	}
	switch p := p.(type) {
	case *sql.DB:
		if p == c.db {
			return cachedPool{ConnPool: p, c: c}
		}
	case *sql.Tx:
		return cachedPool{ConnPool: p, c: c, tx: p}
	}
	return p
}

// cachedPool is a pool whose QueryContext runs cached statements; see
// stmtCache.pool.
type cachedPool struct {
	gorm.ConnPool
	c  *stmtCache
	tx *sql.Tx // nil: the cache's database
}

func (p cachedPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if p.tx == nil {
		if e := p.c.prepare(ctx, query); e != nil {
			defer e.release()
			return e.st.QueryContext(ctx, args...)
		}
	} else if e := p.c.cached(query); e != nil {
		defer e.release()
		return p.tx.StmtContext(ctx, e.st).QueryContext(ctx, args...)
	}
	return p.ConnPool.QueryContext(ctx, query, args...)
}
