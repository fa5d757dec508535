package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/ui"
)

// TestOutboxLogPage: the outbox page and api/logs show each reader's
// cursor on an outbox log with the records behind it and the dead
// letters, escaped, on PostgreSQL and SQLite.
func TestOutboxLogPage(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			db := b.open(t)
			store := sqlstoretest.Log(t, db)
			lg, err := outbox.NewLog(store, 1)
			if err != nil {
				t.Fatal(err)
			}
			var msgs []*outbox.Message
			for _, id := range []string{"m-0", "m-1", "m-2", "m-3"} {
				msgs = append(msgs, &outbox.Message{MessageID: id, Topic: "orders", Payload: []byte("{}")})
			}
			if err := lg.Write(ctx, nil, msgs...); err != nil {
				t.Fatal(err)
			}
			// The relay is done with one record, which it gave up on.
			if _, err := store.OpenCursor(ctx, "relay", 0, 3); err != nil {
				t.Fatal(err)
			}
			var batch driver.LogBatch
			for try := 0; len(batch.Records) == 0; try++ {
				if try == 50 {
					t.Fatal("partition 0 gave no record in 50 reads")
				}
				if batch, err = store.Next(ctx, driver.LogNext{Reader: "relay", Partition: 0, Term: 3, Limit: 1}); err != nil {
					t.Fatal(err)
				}
			}
			end := batch.Records[0].Position
			dead := driver.LogDeadLetter{Record: batch.Records[0], LastError: xssScript}
			if _, err := store.Next(ctx, driver.LogNext{Reader: "relay", Partition: 0, Term: 3, After: end,
				Commit: &driver.LogCommit{To: end, Dead: []driver.LogDeadLetter{dead}}, Limit: 1}); err != nil {
				t.Fatal(err)
			}
			src, err := ui.OutboxLog("events_log", lg)
			if err != nil {
				t.Fatal(err)
			}
			srv := serveConsole(t, ui.Config{Sources: []ui.Source{src}})
			code, _, body := get(t, srv.Client(), srv.URL+"/outbox")
			if code != http.StatusOK {
				t.Fatalf("outbox page: %d\n%s", code, body)
			}
			for _, want := range []string{`data-log="events_log"`, `data-reader="relay" data-partition="0"`, `data-behind="3"`,
				`<td>m-0</td>`, "&lt;script&gt;"} {
				if !strings.Contains(body, want) {
					t.Errorf("outbox page lacks %q", want)
				}
			}
			if strings.Contains(body, xssScript) || strings.Contains(body, "No outbox table") {
				t.Errorf("outbox page: unescaped error or no table:\n%s", body)
			}
			code, _, body = get(t, srv.Client(), srv.URL+"/api/logs")
			var api struct {
				Logs []ui.LogView `json:"logs"`
			}
			if err := json.Unmarshal([]byte(body), &api); code != http.StatusOK || err != nil {
				t.Fatalf("api/logs: %d, %v\n%s", code, err, body)
			}
			if len(api.Logs) != 1 || len(api.Logs[0].Cursors) != 1 || api.Logs[0].Cursors[0].Behind != 3 || api.Logs[0].Cursors[0].Term != 3 ||
				api.Logs[0].Cursors[0].OldestAge < 0 || len(api.Logs[0].DeadLetters) != 1 || api.Logs[0].DeadLetters[0].Record.MessageID != "m-0" {
				t.Errorf("api/logs = %+v", api.Logs)
			}
		})
	}
	if _, err := ui.OutboxLog("", nil); err == nil {
		t.Error("OutboxLog accepted no name and no log")
	}
}
