package jobadmin

import (
	"errors"
	"strconv"
	"testing"

	"github.com/claimstore/claimstore/dao"
)

func TestIndentShowsMarkupAsText(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"\u003cb\u003e \u0026 \u003C"}`: "{\n  \"a\": \"<b> & <\"\n}",
		`{"a":"\\u003cb"}`:                    "{\n  \"a\": \"\\\\u003cb\"\n}",
		`{"a":"\"\u00e9\n"}`:                  "{\n  \"a\": \"\\\"\\u00e9\\n\"\n}",
		`not json <b>`:                        `not json <b>`,
		`[1,2]`:                               "[\n  1,\n  2\n]",
	} {
		if got := Indent(in); got != want {
			t.Errorf("Indent(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseIDs(t *testing.T) {
	ids, err := ParseIDs([]string{"3", " 1", "3"})
	if err != nil || len(ids) != 2 || ids[0] != 3 || ids[1] != 1 {
		t.Fatalf("ParseIDs: %v, %v; want [3 1]", ids, err)
	}
	many := make([]string, MaxIDs+1)
	for i := range many {
		many[i] = strconv.Itoa(i + 1)
	}
	for _, bad := range [][]string{nil, {"0"}, {"-2"}, {"x"}, {"1", ""}, many} {
		if _, err := ParseIDs(bad); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("ParseIDs(%d ids %.20v): %v, want ErrInvalidArgument", len(bad), bad, err)
		}
	}
	if _, err := ParseOp("purge"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("ParseOp(purge): %v", err)
	}
}
