package esstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"

	"github.com/claimstore/claimstore/adapters/esstore"
	"github.com/claimstore/claimstore/adapters/esstore/internal/fakees"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// envURL names the Elasticsearch server the real-server tests use.
const envURL = "CLAIMSTORE_ELASTICSEARCH_URL"

// scripts are the painless sources the fake server recognizes.
var scripts = fakees.Scripts{FieldCompare: esstore.FieldCompareScript, Write: esstore.WriteScript}

// newFake starts an in-process fake server that t closes.
func newFake(t testing.TB) *fakees.Server {
	t.Helper()
	srv := fakees.New(scripts)
	t.Cleanup(srv.Close)
	return srv
}

// newClient returns a client of the server at url, with retries off so
// that every call is exactly one request.
func newClient(t testing.TB, url string) *elasticsearch.Client {
	t.Helper()
	c, err := elasticsearch.NewClient(elasticsearch.Config{
		Addresses:    []string{url},
		DisableRetry: true,
		Transport:    &http.Transport{MaxIdleConnsPerHost: 64},
	})
	if err != nil {
		t.Fatalf("elasticsearch client: %v", err)
	}
	return c
}

// realURL returns the URL of the real server, or skips t (fails it when
// CLAIMSTORE_REQUIRE names elasticsearch) when none is configured or it
// does not answer.
func realURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(envURL)
	how := "start one with `docker compose up elasticsearch` and set " + envURL + "=http://127.0.0.1:9200"
	if url == "" {
		if testdb.Required("elasticsearch") {
			t.Fatalf("%s is not set but CLAIMSTORE_REQUIRE names elasticsearch; %s", envURL, how)
		}
		t.Skipf("no Elasticsearch server: %s is not set; to run these tests %s", envURL, how)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := newClient(t, url).Info(newClient(t, url).Info.WithContext(ctx))
	if err == nil {
		res.Body.Close()
		if res.IsError() {
			err = &esstore.Error{Status: res.StatusCode}
		}
	}
	if err != nil {
		if testdb.Required("elasticsearch") {
			t.Fatalf("Elasticsearch at %s unreachable: %v", url, err)
		}
		t.Skipf("Elasticsearch at %s unreachable: %v; to run these tests %s", url, err, how)
	}
	return url
}

// indexName returns a fresh index name, so parallel runs never collide.
func indexName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "claimstore-test-" + hex.EncodeToString(b)
}

// newStore returns a migrated store of T over a fresh index of the server
// at url, dropped when t finishes.
func newStore[T any](t testing.TB, url string, opts ...esstore.Option) *dao.Table[T] {
	t.Helper()
	opts = append([]esstore.Option{esstore.WithIndex(indexName())}, opts...)
	s, err := esstore.New[T](newClient(t, url), opts...)
	if err != nil {
		t.Fatalf("esstore.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := esstore.Drop(ctx, s); err != nil {
			t.Errorf("Drop: %v", err)
		}
	})
	return s
}

// indexOf returns the name of the index that holds s's documents.
func indexOf[T any](s *dao.Table[T]) string {
	var ix esstore.Indexes
	if !s.As(&ix) {
		panic("an Elasticsearch store gives its indexes to As")
	}
	return ix.Index
}
