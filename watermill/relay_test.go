package watermill_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
	cswm "github.com/claimstore/claimstore/watermill"
)

// The brokers of the relay tests: the local RabbitMQ and Redis, or the
// servers these variables name.
const (
	envAMQP  = "CLAIMSTORE_AMQP_URL"
	envRedis = "CLAIMSTORE_REDIS_ADDR"
)

func amqpURL() string {
	if u := os.Getenv(envAMQP); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

func redisAddr() string {
	if a := os.Getenv(envRedis); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// broker is a Watermill Pub/Sub the relay publishes to in the tests.
type broker struct {
	name string
	// reachable dials the server.
	reachable func() error
	// publisher returns a publisher that returns once the broker stored
	// the message.
	publisher func(t testing.TB) message.Publisher
	// subscriber returns a subscriber of topic, subscribed before any
	// publish, whose broker state is removed when t ends.
	subscriber func(t testing.TB, topic string) <-chan *message.Message
}

var brokers = []broker{
	{
		name: "rabbitmq",
		reachable: func() error {
			c, err := amqp091.Dial(amqpURL())
			if err == nil {
				c.Close()
			}
			return err
		},
		publisher: func(t testing.TB) message.Publisher {
			cfg := amqp.NewDurableQueueConfig(amqpURL())
			cfg.Publish.ConfirmDelivery = true
			cfg.Publish.ChannelPoolSize = relayConcurrency
			pub, err := amqp.NewPublisher(cfg, watermill.NopLogger{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pub.Close() })
			return pub
		},
		subscriber: func(t testing.TB, topic string) <-chan *message.Message {
			cfg := amqp.NewDurableQueueConfig(amqpURL())
			cfg.Consume.Qos.PrefetchCount = 100
			sub, err := amqp.NewSubscriber(cfg, watermill.NopLogger{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = sub.Close()
				c, err := amqp091.Dial(amqpURL())
				if err != nil {
					t.Errorf("delete queue %s: %v", topic, err)
					return
				}
				defer c.Close()
				ch, err := c.Channel()
				if err == nil {
					_, err = ch.QueueDelete(topic, false, false, false)
				}
				if err != nil {
					t.Errorf("delete queue %s: %v", topic, err)
				}
			})
			msgs, err := sub.Subscribe(context.Background(), topic)
			if err != nil {
				t.Fatal(err)
			}
			return msgs
		},
	},
	{
		name: "redis",
		reachable: func() error {
			c, err := net.DialTimeout("tcp", redisAddr(), 2*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		},
		publisher: func(t testing.TB) message.Publisher {
			client := redis.NewClient(&redis.Options{Addr: redisAddr()})
			pub, err := redisstream.NewPublisher(redisstream.PublisherConfig{Client: client}, watermill.NopLogger{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pub.Close(); _ = client.Close() })
			return pub
		},
		subscriber: func(t testing.TB, topic string) <-chan *message.Message {
			client := redis.NewClient(&redis.Options{Addr: redisAddr()})
			sub, err := redisstream.NewSubscriber(redisstream.SubscriberConfig{
				Client: client, ConsumerGroup: "claimstore-test", OldestId: "0",
				BlockTime: 100 * time.Millisecond, DisableIndefiniteInitialBlock: true,
			}, watermill.NopLogger{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = sub.Close() // closes client
				admin := redis.NewClient(&redis.Options{Addr: redisAddr()})
				defer admin.Close()
				if err := admin.Del(context.Background(), topic).Err(); err != nil {
					t.Errorf("delete stream %s: %v", topic, err)
				}
			})
			msgs, err := sub.Subscribe(context.Background(), topic)
			if err != nil {
				t.Fatal(err)
			}
			return msgs
		},
	},
}

// openBroker skips t (or fails it, when CLAIMSTORE_REQUIRE names the
// broker) when b's server cannot be reached.
func openBroker(t *testing.T, b broker) {
	if err := b.reachable(); err != nil {
		msg := fmt.Sprintf("%s unreachable: %v; start it (RabbitMQ on 127.0.0.1:5672 with guest/guest, Redis on 127.0.0.1:6379) or set %s / %s", b.name, err, envAMQP, envRedis)
		if testdb.Required(b.name) {
			t.Fatal(msg + " (required by CLAIMSTORE_REQUIRE)")
		}
		t.Skip(msg)
	}
}

// Settings of the relay killed mid-batch.
const (
	relayMessages  = 300
	relayBatch     = 100
	relayKillAfter = 150 // messages published before the first relay dies: half of its second batch
	relayLease     = 3 * time.Second
	// relayConcurrency is the relay publisher's concurrency, and the
	// AMQP publisher's channel pool.
	relayConcurrency = 16
)

// Environment of the child process that relays and dies.
const (
	envChildBroker = "CLAIMSTORE_WM_RELAY_CHILD"
	envChildTable  = "CLAIMSTORE_WM_RELAY_TABLE"
)

// TestRelayToBroker proves the relay's bridge end to end on each broker:
// messages written by the Publisher are relayed through the broker's
// Watermill publisher by a relay process that is killed (os.Exit, no
// mark, no release) after publishing half of its second batch; a second
// relay takes the dead batch over once its lease ends. Every message
// must arrive with its UUID, payload and metadata; the only repeats are
// messages of the dead batch, which the consumer recognises by UUID.
func TestRelayToBroker(t *testing.T) {
	if os.Getenv(envChildBroker) != "" {
		relayChild(t)
		return
	}
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			openBroker(t, b)
			db := testdb.Postgres(t)
			sqlDB, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			sqlDB.SetMaxOpenConns(4)
			tables := newTables(t, db)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()

			var r [4]byte
			_, _ = rand.Read(r[:])
			topic := "claimstore-relay-" + hex.EncodeToString(r[:])
			received := b.subscriber(t, topic)

			repo := repository(t, db, tables.Messages, outbox.WithLease(relayLease))
			pub, err := cswm.NewPublisher(repo, cswm.PublisherConfig{TargetBroker: b.name})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			var msgs []*message.Message
			for i := range relayMessages {
				m := message.NewMessage(watermill.NewUUID(), []byte(`{"n":`+strconv.Itoa(i)+`}`))
				m.Metadata.Set("n", strconv.Itoa(i))
				want[m.UUID] = strconv.Itoa(i)
				msgs = append(msgs, m)
			}
			if err := pub.Publish(topic, msgs...); err != nil {
				t.Fatal(err)
			}

			// The first relay, in a process of its own, dies mid-batch.
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRelayToBroker$", "-test.count=1")
			cmd.Env = append(os.Environ(), envChildBroker+"="+b.name, envChildTable+"="+tables.Messages, "CLAIMSTORE_WM_RELAY_TOPIC="+topic)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 3 {
				t.Fatalf("the first relay should have died with status 3, got %v:\n%s", err, out)
			}
			counts, err := repo.Counts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if counts[outbox.StatusPublished] != relayBatch || counts[outbox.StatusProcessing] != relayBatch {
				failed, _ := repo.List(ctx, outbox.Filter{Statuses: []outbox.Status{outbox.StatusFailed}, Limit: 1})
				for _, m := range failed {
					t.Logf("failed: %s", m.LastError)
				}
				t.Fatalf("after the first relay died: %v, want %d published and %d processing", counts, relayBatch, relayBatch)
			}

			// The second relay takes over: the dead batch after its lease.
			rp, err := cswm.NewRelayPublisher(b.publisher(t), cswm.RelayPublisherConfig{MaxPending: relayConcurrency})
			if err != nil {
				t.Fatal(err)
			}
			relay, err := outbox.NewRelay(repo, rp, outbox.RelayConfig{TargetBroker: b.name, BatchSize: relayBatch, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- relay.Run(rctx) }()
			defer func() {
				stop()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()

			seen := map[string]int{}
			total := 0
			var drain <-chan time.Time // nil until every message arrived
		read:
			for {
				select {
				case m := <-received:
					total++
					seen[m.UUID]++
					n, ok := want[m.UUID]
					if !ok {
						t.Errorf("unknown message %s", m.UUID)
					} else if m.Metadata.Get("n") != n || string(m.Payload) != `{"n":`+n+`}` {
						t.Errorf("message %s: metadata %v payload %s, want n=%s", m.UUID, m.Metadata, m.Payload, n)
					}
					m.Ack()
					if len(seen) == relayMessages && drain == nil {
						// Every message arrived: read a second more for repeats.
						drain = time.After(time.Second)
					}
				case <-drain:
					break read
				case <-ctx.Done():
					t.Fatalf("%d of %d messages arrived: %v", len(seen), relayMessages, ctx.Err())
				}
			}
			dups := total - len(seen)
			t.Logf("%s: %d messages, %d distinct, %d repeats of the dead batch", b.name, total, len(seen), dups)
			if dups > relayBatch {
				t.Errorf("%d repeats, more than the dead relay's batch of %d", dups, relayBatch)
			}
			for id, n := range seen {
				if n > 2 {
					t.Errorf("message %s arrived %d times", id, n)
				}
			}
			if st := relay.Stats(); st.Published < relayMessages-relayBatch {
				t.Errorf("second relay: %+v", st)
			}
		})
	}
}

// relayChild runs in the child process of TestRelayToBroker: a relay
// that publishes relayKillAfter messages and exits with status 3 in the
// middle of its second batch, marking nothing of it.
func relayChild(t *testing.T) {
	name := os.Getenv(envChildBroker)
	var b broker
	for _, x := range brokers {
		if x.name == name {
			b = x
		}
	}
	db := testdb.Postgres(t)
	repo := repository(t, db, os.Getenv(envChildTable), outbox.WithLease(relayLease))
	rp, err := cswm.NewRelayPublisher(b.publisher(t), cswm.RelayPublisherConfig{MaxPending: relayConcurrency})
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	dying := outbox.PublisherFunc(func(ctx context.Context, msgs []outbox.Message) []error {
		if sent+len(msgs) > relayKillAfter {
			rp.Publish(ctx, msgs[:relayKillAfter-sent])
			os.Exit(3)
		}
		sent += len(msgs)
		return rp.Publish(ctx, msgs)
	})
	relay, err := outbox.NewRelay(repo, dying, outbox.RelayConfig{TargetBroker: name, BatchSize: relayBatch, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = relay.Run(ctx)
	t.Fatal("the relay should have died")
}
