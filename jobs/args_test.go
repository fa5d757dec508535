package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// rawArgs carries JSON of its own.
type rawArgs struct {
	Raw  json.RawMessage `json:"raw"`
	Text string          `json:"text"`
}

func (rawArgs) Kind() string { return "raw" }

// The replacement character is text like any other: written as itself
// or as the escape \ufffd by the args' own JSON, it is accepted; only a
// string that is not UTF-8 is refused.
func TestArgsReplacementCharacterIsText(t *testing.T) {
	store, _ := memstore.New[jobs.Row]()
	c, err := jobs.NewClient(jobs.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, a := range []rawArgs{
		{Raw: json.RawMessage(`"\ufffd"`), Text: "\ufffd"},
		{Raw: json.RawMessage(`{"k":"\ufffd"}`)},
	} {
		res, err := c.Insert(ctx, a, nil)
		if err != nil {
			t.Fatalf("insert %+v: %v", a, err)
		}
		var back rawArgs
		if err := json.Unmarshal([]byte(res.Job.EncodedArgs), &back); err != nil || back.Text != a.Text {
			t.Errorf("args %s read back as %+v (%v)", res.Job.EncodedArgs, back, err)
		}
	}
	if _, err := c.Insert(ctx, rawArgs{Raw: json.RawMessage(`"\ufffd"`), Text: "\xff"}, nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("args with a string that is not UTF-8 beside an escaped replacement character: %v, want dao.ErrInvalidArgument", err)
	}
}
