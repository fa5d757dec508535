package sweep

import (
	"context"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/retry"
)

// Delete deletes the rows of s matching where, at most batch rows per
// statement ([dao.Store.Delete] with a limit), until a statement deletes
// fewer than batch rows or maxBatches statements ran (0: no limit), and
// returns the number of rows deleted. A statement that fails with an
// error dao.IsRetryable accepts (a deadlock between two sweeps) is run
// again after a short pause, up to 5 times in all. Errors: the store's or
// the context's, as retry.Retryable returns them, with the count so far.
func Delete[T any](ctx context.Context, s dao.Store[T], where dao.Criteria, batch, maxBatches int) (int64, error) {
	var total int64
	for b := 0; maxBatches == 0 || b < maxBatches; b++ {
		n, err := retry.Retryable(ctx, 5, func() (int64, error) { return s.Delete(ctx, where, batch) })
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(batch) {
			break
		}
	}
	return total, nil
}
