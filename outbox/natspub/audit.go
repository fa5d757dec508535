package natspub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// AuditResult is what a stream holds, as read back by [Audit].
type AuditResult struct {
	// Messages is the stream's message count when the audit started.
	Messages uint64
	// Read is the number of messages read.
	Read int
	// IDs counts the messages read per Nats-Msg-Id.
	IDs map[string]int
	// NoID is the number of messages read without a Nats-Msg-Id.
	NoID int
}

// Distinct returns the number of distinct message ids read.
func (a *AuditResult) Distinct() int { return len(a.IDs) }

// Duplicates returns the number of messages read beyond the first of each
// id.
func (a *AuditResult) Duplicates() int { return a.Read - a.NoID - len(a.IDs) }

// Audit reads every message of stream, from the first to the last sequence
// present when it starts, with an ordered consumer, and counts them by
// Nats-Msg-Id. Errors are those of the stream lookup and the fetches,
// wrapped, including ctx's.
func Audit(ctx context.Context, js jetstream.JetStream, stream string) (*AuditResult, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("natspub: audit: stream %q: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("natspub: audit: stream info: %w", err)
	}
	res := &AuditResult{Messages: info.State.Msgs, IDs: make(map[string]int, info.State.Msgs)}
	if info.State.Msgs == 0 {
		return res, nil
	}
	last := info.State.LastSeq
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("natspub: audit: consumer: %w", err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("natspub: audit: %w", err)
		}
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return res, fmt.Errorf("natspub: audit: fetch: %w", err)
		}
		done := false
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return res, fmt.Errorf("natspub: audit: metadata: %w", err)
			}
			if meta.Sequence.Stream > last {
				done = true
				continue
			}
			res.Read++
			if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
				res.IDs[id]++
			} else {
				res.NoID++
			}
			if meta.Sequence.Stream == last {
				done = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return res, fmt.Errorf("natspub: audit: fetch: %w", err)
		}
		if done {
			return res, nil
		}
	}
}
