package watermill_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/outbox"
	cswm "github.com/claimstore/claimstore/watermill"
)

// TestDeprecatedConfigFields: each config that sets only a deprecated
// field (SubscriberConfig.MarkTimeout, LogSubscriberConfig.Poll and
// LeaseTTL, RelayPublisherConfig.Concurrency) runs with it as the field
// that replaces it (WriteTimeout, PollInterval, Lease, MaxPending), and
// the new field wins when both are set.
func TestDeprecatedConfigFields(t *testing.T) {
	db := backends[2].open(t)
	tables := newTables(t, db)
	if got := newSubscriber(t, db, tables.Messages, "old", cswm.SubscriberConfig{MarkTimeout: 3 * time.Second}).Config().WriteTimeout; got != 3*time.Second {
		t.Errorf("MarkTimeout 3s alone: WriteTimeout %v, want 3s", got)
	}
	if got := newSubscriber(t, db, tables.Messages, "both", cswm.SubscriberConfig{MarkTimeout: 3 * time.Second, WriteTimeout: 4 * time.Second}).Config().WriteTimeout; got != 4*time.Second {
		t.Errorf("both set: WriteTimeout %v, want 4s", got)
	}

	lg, err := outbox.NewLog(sqlstoretest.Log(t, db), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                string
		cfg                 cswm.LogSubscriberConfig
		wantPoll, wantLease time.Duration
	}{
		{"old only", cswm.LogSubscriberConfig{Poll: 70 * time.Millisecond, LeaseTTL: 9 * time.Second}, 70 * time.Millisecond, 9 * time.Second},
		{"both", cswm.LogSubscriberConfig{Poll: 70 * time.Millisecond, PollInterval: 30 * time.Millisecond, LeaseTTL: 9 * time.Second, Lease: 6 * time.Second}, 30 * time.Millisecond, 6 * time.Second},
	} {
		cfg := c.cfg
		cfg.Leases = memstore.NewLeases()
		s, err := cswm.NewLogSubscriber(lg, cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := cswm.LogSubscriberConfigOf(s)
		if got.PollInterval != c.wantPoll || got.Lease != c.wantLease {
			t.Errorf("%s: PollInterval %v, Lease %v; want %v, %v", c.name, got.PollInterval, got.Lease, c.wantPoll, c.wantLease)
		}
	}

	pub := gochannel.NewGoChannel(gochannel.Config{}, nil)
	defer func() { _ = pub.Close() }()
	for _, c := range []struct {
		name string
		cfg  cswm.RelayPublisherConfig
		want int
	}{
		{"old only", cswm.RelayPublisherConfig{Concurrency: 5}, 5},
		{"both", cswm.RelayPublisherConfig{Concurrency: 5, MaxPending: 7}, 7},
		{"neither", cswm.RelayPublisherConfig{}, 1},
	} {
		rp, err := cswm.NewRelayPublisher(pub, c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := cswm.RelayPublisherConfigOf(rp).MaxPending; got != c.want {
			t.Errorf("%s: MaxPending %d, want %d", c.name, got, c.want)
		}
	}
}
