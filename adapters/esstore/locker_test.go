package esstore_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"

	"github.com/claimstore/claimstore/adapters/esstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/coord"
	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// TestTryLockRequests checks the requests of one acquired attempt on the
// fake: a real-time get of the lease, its creation with op_type=create,
// and its release conditioned on the version written.
func TestTryLockRequests(t *testing.T) {
	fake := newFake(t)
	s := newStore[conformance.Job](t, fake.URL())
	var ix esstore.Indexes
	s.As(&ix)
	locks := ix.Index + "-claimstore-locks"
	id := base64.RawURLEncoding.EncodeToString([]byte("cycle/1"))
	fake.ResetRequests()
	ran, err := coord.WithLock(context.Background(), s, "cycle/1", func(context.Context, any) error { return nil })
	if !ran || err != nil {
		t.Fatalf("WithLock = %v, %v", ran, err)
	}
	reqs := strings.Join(fake.Requests(), "\n")
	for _, want := range []string{
		"GET /" + locks + "/_doc/" + id,
		"PUT /" + locks + "/_doc/" + id + "?op_type=create",
		"PUT /" + locks + "/_doc/" + id + "?if_primary_term=1&if_seq_no=0",
	} {
		if !strings.Contains(reqs, want) {
			t.Errorf("requests lack %q:\n%s", want, reqs)
		}
	}
	// Released: the next attempt takes over the released lease.
	ran, err = coord.WithLock(context.Background(), s, "cycle/1", func(context.Context, any) error { return nil })
	if !ran || err != nil {
		t.Errorf("attempt after the release = %v, %v", ran, err)
	}
}

// TestTryLockExpired checks that the lease of a holder that died (never
// released, expiry in the past) is taken over, and that a live one is not.
func TestTryLockExpired(t *testing.T) {
	fake := newFake(t)
	s := newStore[conformance.Job](t, fake.URL())
	var client *elasticsearch.Client
	var ix esstore.Indexes
	s.As(&client)
	s.As(&ix)
	plant := func(key string, expires time.Time) {
		body := `{"key":"` + key + `","holder":"dead","expires_at":` + strconv.FormatInt(expires.UnixMilli(), 10) + `}`
		res, err := esapi.IndexRequest{Index: ix.Index + "-claimstore-locks", DocumentID: base64.RawURLEncoding.EncodeToString([]byte(key)),
			Body: strings.NewReader(body)}.Do(context.Background(), client)
		if err != nil || res.IsError() {
			t.Fatalf("plant lease: %v %v", err, res)
		}
		res.Body.Close()
	}
	plant("expired", time.Now().Add(-time.Second))
	plant("live", time.Now().Add(time.Minute))
	if ran, err := coord.WithLock(context.Background(), s, "expired", func(context.Context, any) error { return nil }); !ran || err != nil {
		t.Errorf("expired lease: %v, %v; want it taken over", ran, err)
	}
	if ran, err := coord.WithLock(context.Background(), s, "live", func(context.Context, any) error { return nil }); ran || err != nil {
		t.Errorf("live lease of another holder: %v, %v; want false, nil", ran, err)
	}
}

// TestTryLockLeaseLost checks the renewal: a lease renewed past several
// TTLs keeps the lock, and a lease another holder took over cancels the
// unit of work, which then returns dao.ErrConflict.
func TestTryLockLeaseLost(t *testing.T) {
	fake := newFake(t)
	const ttl = 150 * time.Millisecond
	s := newStore[conformance.Job](t, fake.URL(), esstore.WithLockLease(ttl))
	ctx := context.Background()
	ran, err := coord.WithLock(ctx, s, "long", func(ctx context.Context, _ any) error {
		time.Sleep(4 * ttl)
		if other, err := coord.WithLock(ctx, s, "long", func(context.Context, any) error { return nil }); other || err != nil {
			t.Errorf("attempt on a renewed lease = %v, %v; want false, nil", other, err)
		}
		return ctx.Err()
	})
	if !ran || err != nil {
		t.Errorf("unit of work longer than the TTL = %v, %v; want its lease renewed", ran, err)
	}

	var client *elasticsearch.Client
	var ix esstore.Indexes
	s.As(&client)
	s.As(&ix)
	ran, err = coord.WithLock(ctx, s, "stolen", func(ctx context.Context, _ any) error {
		// Another holder overwrites the lease, as after a long pause.
		res, err := esapi.IndexRequest{Index: ix.Index + "-claimstore-locks", DocumentID: base64.RawURLEncoding.EncodeToString([]byte("stolen")),
			Body: strings.NewReader(`{"key":"stolen","holder":"thief","expires_at":` + strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10) + `}`)}.Do(ctx, client)
		if err != nil || res.IsError() {
			t.Fatalf("overwrite lease: %v %v", err, res)
		}
		res.Body.Close()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * ttl):
			t.Error("the unit of work's context was not cancelled after its lease was lost")
			return nil
		}
	})
	if !ran || !errors.Is(err, dao.ErrConflict) {
		t.Errorf("lease lost = %v, %v; want true and ErrConflict", ran, err)
	}
}
