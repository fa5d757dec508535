package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// CursorLag is one reader's cursor on one partition and how far it is
// behind (see [Log.Lags]).
type CursorLag struct {
	LogCursor
	// Behind is the number of records after the cursor, counted up to
	// the limit given to [Log.Lags]; AtLeast says the count stopped
	// there (there may be more).
	Behind  int64
	AtLeast bool
	// Oldest is when the oldest of them was written; zero when none.
	Oldest time.Time
}

// Age returns how long the oldest record behind the cursor has waited at
// now: 0 when the reader is caught up.
func (c CursorLag) Age(now time.Time) time.Duration {
	if c.Behind == 0 {
		return 0
	}
	return max(now.Sub(c.Oldest), 0)
}

// Trim deletes the records every reader is done with, up to batch (>= 1)
// records per partition per call, oldest first, and moves each trimmed
// partition's retention mark. A partition no reader has a cursor on keeps
// everything. It returns how many records it deleted; call it again
// while it returns a full batch. Several servers may trim at once.
func (l *Log) Trim(ctx context.Context, batch int) (int64, error) {
	if batch < 1 {
		return 0, fmt.Errorf("outbox: log trim: %w: batch %d", dao.ErrInvalidArgument, batch)
	}
	cs, err := l.store.Cursors(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: log trim: %w", err)
	}
	slowest := map[int]driver.LogPosition{}
	for _, c := range cs {
		if c.Reader == driver.LogRetentionReader {
			continue
		}
		if p, ok := slowest[c.Partition]; !ok || c.Position.Less(p) {
			slowest[c.Partition] = c.Position
		}
	}
	var total int64
	for part, upTo := range slowest {
		if upTo == (driver.LogPosition{}) {
			continue
		}
		n, err := l.store.Trim(ctx, part, upTo, batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: log trim: %w", err)
		}
	}
	return total, nil
}

// Lags returns every reader's cursor on every partition, ordered by
// reader and partition, with how far it is behind: the records after it,
// counted up to limit (>= 1) per cursor so that a reader far behind costs
// a bounded read, and the oldest one's time. Retention marks are not
// listed. Errors wrap [dao.ErrInvalidArgument] for a limit below 1, or
// the store's failure.
func (l *Log) Lags(ctx context.Context, limit int) ([]CursorLag, error) {
	if limit < 1 {
		return nil, fmt.Errorf("outbox: log lags: %w: limit %d", dao.ErrInvalidArgument, limit)
	}
	cs, err := l.store.Cursors(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: log lags: %w", err)
	}
	var out []CursorLag
	for _, c := range cs {
		if c.Reader == driver.LogRetentionReader {
			continue
		}
		lag, err := l.store.Lag(ctx, c.Partition, c.Position, limit)
		if err != nil {
			return nil, fmt.Errorf("outbox: log lags: %w", err)
		}
		out = append(out, CursorLag{LogCursor: c, Behind: lag.Behind, AtLeast: lag.Behind >= int64(limit), Oldest: lag.Oldest})
	}
	return out, nil
}

// LogStatus is what an operator reads of a log: every reader's cursor
// with its lag, and the first dead letters (see [Log.Status]).
type LogStatus struct {
	Cursors     []CursorLag
	DeadLetters []LogDeadLetter
	// MoreDead says that more dead letters follow those listed.
	MoreDead bool
}

// Status returns the log's cursors with their lags, each counted up to
// lagLimit (>= 1) records, and its first deadLimit (>= 0) dead letters
// in id order. Errors wrap [dao.ErrInvalidArgument] for a limit out of
// range, or the store's failure.
func (l *Log) Status(ctx context.Context, lagLimit, deadLimit int) (LogStatus, error) {
	var st LogStatus
	if deadLimit < 0 {
		return st, fmt.Errorf("outbox: log status: %w: dead-letter limit %d", dao.ErrInvalidArgument, deadLimit)
	}
	var err error
	if st.Cursors, err = l.Lags(ctx, lagLimit); err != nil {
		return st, err
	}
	if deadLimit == 0 {
		return st, nil
	}
	dead, err := l.store.DeadLetters(ctx, 0, deadLimit+1)
	if err != nil {
		return st, fmt.Errorf("outbox: log status: %w", err)
	}
	if len(dead) > deadLimit {
		st.MoreDead, dead = true, dead[:deadLimit]
	}
	st.DeadLetters = dead
	return st, nil
}
