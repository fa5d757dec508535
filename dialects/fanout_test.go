package dialects

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// fanOutRequest is an outbox-shaped fan-out: messages and deliveries with
// the outbox's columns, pending copies and own copies claimed by w1.
func fanOutRequest() FanOut {
	now := driver.CurrentTime{Form: driver.TimeValue}
	held := dao.And(dao.Eq("status", "processing"), dao.Eq("locked_by", "w1"))
	published := dao.Set{"status": "published", "published_at": now, "locked_until": nil, "last_processed_at": now}
	mark := dao.Set{"status": "published", "published_at": now, "locked_until": nil, "last_processed_at": now, "locked_by": "w1"}
	return FanOut{
		Messages:    Table{Name: "outbox", PrimaryKey: "id", Nullable: map[string]bool{"locked_until": true}},
		Deliveries:  Table{Name: "outbox_deliveries", PrimaryKey: "id"},
		Groups:      "outbox_groups",
		GroupColumn: "consumer_group",
		TopicColumn: "topic",
		Claim: dao.Query{
			Where: dao.And(dao.Eq("target_broker", "nats"), dao.IsNull("published_at"), dao.Or(
				dao.Eq("status", "pending"),
				dao.And(dao.Eq("status", "processing"), dao.Lt("locked_until", now)))),
			OrderBy: []dao.Order{dao.Desc("priority"), dao.Asc("created_at")},
			Limit:   100,
		},
		Mark:      mark,
		Acked:     []int64{7, 3},
		AckWhere:  held,
		AckSet:    published,
		OwnGroup:  "billing",
		OwnTopic:  "orders",
		OwnLimit:  50,
		OwnMarker: "status",
		Columns: []FanOutColumn{
			{Name: "message_id"}, {Name: "topic"}, {Name: "payload"}, {Name: "priority"}, {Name: "created_at"},
			{Name: "target_broker", From: FromDeliveryKey},
			{Name: "partition_key", From: FromGroup},
			{Name: "status", From: FromValue, Value: "pending", Own: "processing"},
			{Name: "retry_count", From: FromValue, Value: int64(0)},
			{Name: "next_retry_at", From: FromValue},
			{Name: "locked_by", From: FromValue, Value: "", Own: "w1"},
			{Name: "locked_until", From: FromValue, Own: Later{After: 30 * time.Second}},
			{Name: "last_processed_at", From: FromValue, Own: now},
		},
		DeliveryKey: DeliveryKey{Prefix: "d:", Digits: 40},
		Conflict:    []string{"message_id", "target_broker"},
		Returning:   []string{"id", "message_id", "status", "locked_until"},
	}
}

// fanOutCases are the golden fan-out requests: the outbox's, one with
// identifiers holding every dialect's closing quote, and refusals.
func fanOutCases() []struct {
	name string
	f    FanOut
} {
	odd := fanOutRequest()
	odd.Messages = Table{Name: "app.o\"`]m", PrimaryKey: "i\"`]d"}
	odd.Deliveries = Table{Name: "app.o\"`]d", PrimaryKey: "i\"`]d"}
	odd.Groups, odd.GroupColumn, odd.TopicColumn = "g\"`]s", "g\"`]c", "t\"`]c"
	odd.Claim.OrderBy = nil
	odd.Acked = nil
	noAcks := fanOutRequest()
	noAcks.Acked, noAcks.OwnLimit = nil, 0
	change := func(f func(*FanOut)) FanOut {
		r := fanOutRequest()
		f(&r)
		return r
	}
	return []struct {
		name string
		f    FanOut
	}{
		{"outbox", fanOutRequest()},
		{"no-acks-no-own", noAcks},
		{"odd-identifiers", odd},
		{"refused/zero-limit", change(func(f *FanOut) { f.Claim.Limit = 0 })},
		{"refused/negative-own-limit", change(func(f *FanOut) { f.OwnLimit = -1 })},
		{"refused/order-not-copied", change(func(f *FanOut) { f.Claim.OrderBy = []dao.Order{dao.Asc("next_retry_at")} })},
		{"refused/marker-not-bound", change(func(f *FanOut) { f.OwnMarker = "locked_until" })},
		{"refused/other-primary-key", change(func(f *FanOut) { f.Deliveries.PrimaryKey = "delivery_id" })},
		{"refused/no-groups", change(func(f *FanOut) { f.GroupColumn = "" })},
		{"refused/key-digits", change(func(f *FanOut) { f.DeliveryKey.Digits = 65 })},
		{"refused/unknown-source", change(func(f *FanOut) { f.Columns[0].From = FanOutSource(9) })},
		{"refused/empty-mark", change(func(f *FanOut) { f.Mark = dao.Set{} })},
		{"refused/empty-or", change(func(f *FanOut) { f.Claim.Where = dao.Or() })},
	}
}

// TestGoldenFanOut compares the fan-out of every dialect with its golden
// file (testdata/<dialect>/fan-out.golden); -update writes them.
func TestGoldenFanOut(t *testing.T) {
	for _, n := range All() {
		t.Run(string(n), func(t *testing.T) {
			r := mustRenderer(t, n)
			var b strings.Builder
			for _, c := range fanOutCases() {
				fmt.Fprintf(&b, "-- %s\n", c.name)
				st, err := r.FanOut(c.f)
				if err != nil {
					if !errors.Is(err, dao.ErrInvalidArgument) {
						t.Errorf("%s: error %v does not wrap ErrInvalidArgument", c.name, err)
					}
					fmt.Fprintf(&b, "-- error: %v\n\n", err)
					continue
				}
				if strings.HasPrefix(c.name, "refused/") {
					t.Errorf("%s: rendered, want a refusal", c.name)
				}
				fmt.Fprintf(&b, "%s\n-- args: %s\n\n", st.SQL, formatArgs(st.Args))
			}
			checkGolden(t, filepath.Join("testdata", string(n), "fan-out.golden"), b.String())
		})
	}
}

// TestFanOutBindsEveryValue: no value of the request appears in the text.
func TestFanOutBindsEveryValue(t *testing.T) {
	r := mustRenderer(t, Postgres)
	f := fanOutRequest()
	f.OwnGroup, f.OwnTopic = "'; DROP TABLE outbox; --", "x' OR '1'='1"
	f.DeliveryKey.Prefix = "'evil"
	st, err := r.FanOut(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"DROP TABLE", "'1'='1", "evil", "billing", "nats", "w1", "processing"} {
		if strings.Contains(st.SQL, v) {
			t.Errorf("value %q in the statement text:\n%s", v, st.SQL)
		}
	}
}
