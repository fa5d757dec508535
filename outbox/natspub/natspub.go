package natspub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// Headers the publisher sets besides the message's own headers. The
// message id goes in [jetstream.MsgIDHeader] (Nats-Msg-Id).
const (
	HeaderType          = "Outbox-Type"
	HeaderCorrelationID = "Outbox-Correlation-Id"
	HeaderCausationID   = "Outbox-Causation-Id"
	HeaderPartitionKey  = "Outbox-Partition-Key"
)

// Config configures a [Publisher]. Zero fields take their defaults.
type Config struct {
	// Subject returns the subject of a message; default its Topic. The
	// subject must belong to a stream.
	Subject func(m *outbox.Message) string
	// MaxPending is the most asynchronous publishes awaiting their ack on
	// this publisher; a batch that would exceed it waits for acks first
	// (nats.go's stall). Default 8192; keep it at least the relay's
	// BatchSize × Concurrency × Window.
	MaxPending int
	// AckTimeout is the longest wait for one message's ack, in addition to
	// the deadline of the context given to Publish; default 10 s.
	AckTimeout time.Duration
	// MinDuplicateWindow, when above zero, is the duplicate window
	// (StreamConfig.Duplicates) every stream this publisher stores into
	// should have: the first time a stream acknowledges one of its
	// messages, the publisher reads the stream's configuration
	// ([Publisher.CheckStream]) and logs a warning on Logger when the
	// window is shorter. A check that fails (an account that may not
	// read stream information) is logged at WARN once and tried again a
	// minute later, not at every publish. Set it to the relay's retry horizon,
	// outbox.RetryHorizon(policy, relay.Config()). Default 0: no check.
	MinDuplicateWindow time.Duration
	// Logger receives the warnings of MinDuplicateWindow; default
	// slog.Default().
	Logger *slog.Logger
}

// ErrShortWindow is wrapped by the error of [Publisher.CheckStream] for a
// stream whose duplicate window is shorter than the publisher's
// Config.MinDuplicateWindow: a message published again after the window
// (a lost ack, a relay that died before its mark) is stored twice.
var ErrShortWindow = errors.New("natspub: the stream's duplicate window is shorter than the relay's retry horizon")

// Publisher publishes outbox messages to NATS JetStream. Each message is
// sent with PublishMsgAsync carrying its MessageID in Nats-Msg-Id, so the
// stream drops a message it already stored within its duplicate window
// (StreamConfig.Duplicates: size it with outbox.RetryHorizon, see the
// package documentation; JetStream's default is 2 min); the acks of a batch are
// collected before Publish returns. It implements [outbox.Publisher] and is
// safe for concurrent use.
type Publisher struct {
	js        jetstream.JetStream
	subject   func(m *outbox.Message) string
	minWindow time.Duration
	log       *slog.Logger
	checked   sync.Map // stream name → windowCheck
}

var _ outbox.Publisher = (*Publisher)(nil)

// New returns a publisher on the connection nc, with its own JetStream
// context configured from cfg. The caller keeps ownership of nc; connect it
// with reconnection enabled (nats.MaxReconnects(-1)) so that the publisher
// recovers when the server comes back. Errors wrap
// [dao.ErrInvalidArgument] for a nil connection or negative settings, or
// come from jetstream.New.
func New(nc *nats.Conn, cfg Config) (*Publisher, error) {
	if nc == nil {
		return nil, fmt.Errorf("natspub: %w: nil connection", dao.ErrInvalidArgument)
	}
	if cfg.MaxPending < 0 || cfg.AckTimeout < 0 || cfg.MinDuplicateWindow < 0 {
		return nil, fmt.Errorf("natspub: %w: negative max pending, ack timeout or duplicate window", dao.ErrInvalidArgument)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = 8192
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 10 * time.Second
	}
	if cfg.Subject == nil {
		cfg.Subject = func(m *outbox.Message) string { return m.Topic }
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(cfg.AckTimeout))
	if err != nil {
		return nil, fmt.Errorf("natspub: jetstream: %w", err)
	}
	return &Publisher{js: js, subject: cfg.Subject, minWindow: cfg.MinDuplicateWindow, log: cfg.Logger.With("component", "natspub")}, nil
}

// JetStream returns the publisher's JetStream context.
func (p *Publisher) JetStream() jetstream.JetStream { return p.js }

// NewMsg returns the NATS message for m: subject from the configuration,
// payload, the message's headers, Nats-Msg-Id set to m.MessageID, and the
// Outbox-* headers for the type, correlation id, causation id and partition
// key when they are set.
func (p *Publisher) NewMsg(m *outbox.Message) *nats.Msg {
	h := make(nats.Header, len(m.Headers)+5)
	for k, v := range m.Headers {
		h.Set(k, v)
	}
	for _, kv := range [...][2]string{
		{HeaderType, m.Type}, {HeaderCorrelationID, m.CorrelationID},
		{HeaderCausationID, m.CausationID}, {HeaderPartitionKey, m.PartitionKey},
	} {
		if kv[1] != "" {
			h.Set(kv[0], kv[1])
		}
	}
	h.Set(jetstream.MsgIDHeader, m.MessageID)
	return &nats.Msg{Subject: p.subject(m), Data: m.Payload, Header: h}
}

// Publish sends every message of msgs asynchronously, then waits for each
// ack until ctx ends. The result at index i is nil when JetStream stored
// msgs[i] or reported it as a duplicate of a stored message; otherwise the
// error: the ack's error (no stream for the subject, wrapping
// [outbox.ErrNoStream]; a stream that holds the subject but did not
// answer, while its replicas elect a leader; a disconnection; the ack
// timeout), ctx's error wrapped, or — for a message NATS can never
// accept (payload over the server's limit, invalid subject) — an error
// wrapping [outbox.ErrPermanent].
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	var opts []jetstream.PublishOpt
	if dl, ok := ctx.Deadline(); ok {
		if wait := time.Until(dl); wait > 0 {
			opts = append(opts, jetstream.WithStallWait(wait))
		}
	}
	for i := range msgs {
		if err := ctx.Err(); err != nil {
			errs[i] = fmt.Errorf("natspub: publish %q: %w", msgs[i].MessageID, err)
			continue
		}
		f, err := p.js.PublishMsgAsync(p.NewMsg(&msgs[i]), opts...)
		if err != nil {
			if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
				err = outbox.Permanent(err)
			}
			errs[i] = fmt.Errorf("natspub: publish %q: %w", msgs[i].MessageID, err)
			continue
		}
		futures[i] = f
	}
	var looked map[string]error // noResponse's answers, per subject
	var stored []string         // streams that acknowledged, when windows are checked
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			if p.minWindow > 0 && !slices.Contains(stored, ack.Stream) {
				stored = append(stored, ack.Stream)
			}
		case err := <-f.Err():
			if errors.Is(err, jetstream.ErrNoStreamResponse) {
				err = p.noResponse(ctx, f.Msg().Subject, err, &looked)
			}
			errs[i] = fmt.Errorf("natspub: ack of %q: %w", msgs[i].MessageID, err)
		case <-ctx.Done():
			errs[i] = fmt.Errorf("natspub: ack of %q: %w", msgs[i].MessageID, ctx.Err())
		}
	}
	for _, name := range stored {
		p.checkOnce(ctx, name)
	}
	return errs
}

// CheckStream reads the configuration of the stream named stream and
// returns its duplicate window (StreamConfig.Duplicates). The error wraps
// [ErrShortWindow] when the window is shorter than the publisher's
// Config.MinDuplicateWindow (the window is returned with it), or comes
// from JetStream (jetstream.ErrStreamNotFound, ctx's error).
func (p *Publisher) CheckStream(ctx context.Context, stream string) (time.Duration, error) {
	st, err := p.js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("natspub: stream %q: %w", stream, err)
	}
	w := st.CachedInfo().Config.Duplicates
	if w < p.minWindow {
		return w, fmt.Errorf("%w: stream %q keeps message ids for %v, messages may be published again for up to %v; raise its Duplicates (jetstream.StreamConfig)",
			ErrShortWindow, stream, w, p.minWindow)
	}
	return w, nil
}

// windowCheck is what checkOnce knows of one stream's window: checked
// (done), or failed and to be tried again from retryAt.
type windowCheck struct {
	done    bool
	retryAt time.Time
}

// checkRetry is how long after a failed window check (the account may not
// read stream information, the server did not answer) the stream is
// checked again.
const checkRetry = time.Minute

// checkOnce runs CheckStream for stream the first time it acknowledges a
// message of this publisher, and logs at WARN a window too short. A check
// that failed otherwise is logged at WARN the first time (at DEBUG after)
// and tried again at a publish checkRetry later, so that a publisher that
// cannot read stream information does not wait for the server on every
// publish.
func (p *Publisher) checkOnce(ctx context.Context, stream string) {
	prev, seen := p.checked.Load(stream)
	if c, _ := prev.(windowCheck); c.done || time.Now().Before(c.retryAt) {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, streamLookupTimeout)
	_, err := p.CheckStream(cctx, stream)
	cancel()
	switch {
	case err == nil:
		p.checked.Store(stream, windowCheck{done: true})
	case errors.Is(err, ErrShortWindow):
		old, _ := p.checked.Swap(stream, windowCheck{done: true})
		if c, _ := old.(windowCheck); !c.done {
			p.log.Warn("duplicate window shorter than the retry horizon", "stream", stream, "err", err)
		}
	default:
		p.checked.Store(stream, windowCheck{retryAt: time.Now().Add(checkRetry)})
		level := slog.LevelWarn
		if seen {
			level = slog.LevelDebug
		}
		p.log.Log(ctx, level, "duplicate window not checked", "stream", stream, "retry_in", checkRetry, "err", err)
	}
}

// streamLookupTimeout bounds noResponse's question to the server.
const streamLookupTimeout = 2 * time.Second

// noResponse classifies err, a publish to subject that no stream answered
// (NATS "no responders"). JetStream answers so both when no stream holds
// the subject and when the stream that holds it has no leader (its
// replicas are electing one after a node was lost), so it asks the server
// which stream holds the subject, once per subject and batch (answers
// kept in *looked): none (jetstream.ErrStreamNotFound) wraps
// [outbox.ErrNoStream]; a stream, or no answer to the question either,
// leaves a plain transient error that names the stream when known.
func (p *Publisher) noResponse(ctx context.Context, subject string, err error, looked *map[string]error) error {
	if *looked == nil {
		*looked = make(map[string]error)
	}
	cls, ok := (*looked)[subject]
	if !ok {
		lctx, cancel := context.WithTimeout(ctx, streamLookupTimeout)
		name, lerr := p.js.StreamNameBySubject(lctx, subject)
		cancel()
		switch {
		case errors.Is(lerr, jetstream.ErrStreamNotFound):
			cls = outbox.ErrNoStream
		case lerr == nil:
			cls = fmt.Errorf("stream %q holds the subject but did not answer (no leader: its replicas may be electing one)", name)
		default:
			cls = fmt.Errorf("no stream answered, and asking which stream holds the subject failed: %w", lerr)
		}
		(*looked)[subject] = cls
	}
	if cls == outbox.ErrNoStream {
		return fmt.Errorf("%w %q: %w", outbox.ErrNoStream, subject, err)
	}
	return fmt.Errorf("%q: %w: %w", subject, cls, err)
}
