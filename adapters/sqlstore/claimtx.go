package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
)

// ClaimInTx is the claim of a store bound to a caller's transaction
// ([dao.Table.ClaimInTx]): the fast path's statements, run in that
// transaction with the caller's context, neither committed nor rolled
// back here.
//
//   - PostgreSQL and SQLite: the one statement of dialects.Renderer.Claim,
//     one round trip (on SQLite the transaction holds the write lock from
//     its first write on).
//   - SQL Server: the one UPDATE … OUTPUT statement, its rows sorted into
//     the claim's order.
//   - MySQL 8.0.1+ and MariaDB 10.6+: the locking read (FOR UPDATE SKIP
//     LOCKED) and the UPDATE by primary key of the fast path, two round
//     trips, each bounded by the store's lock-wait and statement limits as
//     the fast path's are. In a REPEATABLE READ transaction the locking
//     read also takes gap locks (MySQL manual, "Locking Reads"): the
//     caller should run the transaction in READ COMMITTED.
//
// A dialect without a fast path, or a server too old for SKIP LOCKED,
// returns an error wrapping errors.ErrUnsupported and sends nothing.
func (s *sqlDriver[T]) ClaimInTx(ctx context.Context, req dao.ClaimRequest) ([]T, error) {
	if !s.inTx {
		return nil, fmt.Errorf("%w: the store is not bound to a transaction", dao.ErrInvalidArgument)
	}
	if !s.ClaimerInfo().Available {
		return nil, fmt.Errorf("%w: %s has no claim inside a transaction (a server without SKIP LOCKED)", errors.ErrUnsupported, s.dialect)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.dialect == dialects.MySQL || s.dialect == dialects.MariaDB {
		lock, err := s.r.LockCandidates(s.table, dao.Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
		if err != nil {
			return nil, err
		}
		rows, err := s.lockAndUpdate(ctx, ctx, s.pool, lock, req.Set)
		if err != nil {
			return nil, err
		}
		for i := range rows {
			if err := s.model.Apply(&rows[i], req.Set); err != nil {
				return nil, err
			}
		}
		return rows, nil
	}
	st, err := s.r.Claim(s.table, req)
	if err != nil {
		return nil, err
	}
	switch s.dialect {
	case dialects.SQLite:
		return s.queryRanked(ctx, s.pool, st, req.Limit)
	case dialects.SQLServer:
		rows, err := s.query(ctx, s.pool, st)
		if err == nil {
			s.sortClaimed(rows, req.OrderBy)
		}
		return rows, err
	default:
		return s.query(ctx, s.pool, st)
	}
}
