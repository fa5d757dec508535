package outbox

import "context"

// Publisher sends a batch of messages to a broker. It is the only thing a
// relay needs from a broker; see package outbox/natspub for NATS JetStream.
type Publisher interface {
	// Publish sends msgs and waits for the broker's acknowledgements. It
	// returns a slice of len(msgs) errors: nil at index i means the broker
	// acknowledged msgs[i] (durably stored, or recognised as a duplicate
	// of a message it already stored); non-nil means it did not, and the
	// relay marks the message failed. Wrap errors that no retry can cure
	// with [Permanent]. When ctx ends before an acknowledgement arrives the
	// message's error wraps ctx.Err(). Publish must be safe for concurrent
	// use and must not keep msgs after it returns.
	Publish(ctx context.Context, msgs []Message) []error
}

// PublisherFunc adapts a function to [Publisher].
type PublisherFunc func(ctx context.Context, msgs []Message) []error

// Publish calls f(ctx, msgs).
func (f PublisherFunc) Publish(ctx context.Context, msgs []Message) []error { return f(ctx, msgs) }
