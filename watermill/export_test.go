package watermill

import (
	"context"

	"github.com/claimstore/claimstore/outbox"
)

// FanOut runs one fan-out step of s as worker for a subscription of
// topic, with room for own deliveries claimed at once and the deliveries
// acked to mark (PostgreSQL); it returns the messages claimed, the
// deliveries claimed for worker and the count of acks marked.
func FanOut(ctx context.Context, s *Subscriber, worker, topic string, own int, acked []int64) (int, []outbox.Message, int, error) {
	fast, err := s.oneStatement(ctx)
	if err != nil {
		return 0, nil, 0, err
	}
	r, err := s.fanOut(ctx, fast, worker, topic, own, acked)
	return r.claimed, r.mine, r.acked, err
}

// FansOutInOneStatement reports whether s fans out with the PostgreSQL
// statement.
func FansOutInOneStatement(ctx context.Context, s *Subscriber) bool {
	ok, err := s.oneStatement(ctx)
	return ok && err == nil
}

// FanOutPortably makes s fan out with the portable steps.
func FanOutPortably(s *Subscriber) { s.fast = nil }

// LogSubscriberConfigOf returns the configuration s reads with, defaults
// applied and deprecated fields read.
func LogSubscriberConfigOf(s *LogSubscriber) LogSubscriberConfig { return s.cfg }

// RelayPublisherConfigOf returns the configuration p publishes with,
// defaults applied and deprecated fields read.
func RelayPublisherConfigOf(p *RelayPublisher) RelayPublisherConfig { return p.cfg }
