package outboxbench

import (
	"context"
	"sync/atomic"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// perMessageMarks is a store whose Update, when its criteria name rows by
// id (id IN (...) as the first operand of an And, as every mark of the
// repository does), sends one UPDATE per id: the per-message variant. It
// counts the UPDATEs it sends in updates.
type perMessageMarks struct {
	dao.Store[outbox.Message]
	updates *atomic.Int64
}

// Update runs the update, one statement per id when the criteria name rows
// by id.
func (s perMessageMarks) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	ch := where.Children()
	if where.Op() != dao.OpAnd || len(ch) == 0 || ch[0].Op() != dao.OpIn || ch[0].Field() != "id" {
		s.updates.Add(1)
		return s.Store.Update(ctx, where, set)
	}
	var total int64
	for _, id := range ch[0].Values() {
		s.updates.Add(1)
		n, err := s.Store.Update(ctx, dao.And(append([]dao.Criteria{dao.Eq("id", id)}, ch[1:]...)...), set)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// countingUpdates counts the UPDATE statements of the batched variant in
// updates.
type countingUpdates struct {
	dao.Store[outbox.Message]
	updates *atomic.Int64
}

// Update runs the update and counts it.
func (s countingUpdates) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	s.updates.Add(1)
	return s.Store.Update(ctx, where, set)
}

// wrapper returns the store wrapper of variant, counting UPDATEs in
// updates.
func wrapper(variant string, updates *atomic.Int64) func(dao.Store[outbox.Message]) dao.Store[outbox.Message] {
	return func(s dao.Store[outbox.Message]) dao.Store[outbox.Message] {
		if variant == VariantPerMessage {
			return perMessageMarks{s, updates}
		}
		return countingUpdates{s, updates}
	}
}
