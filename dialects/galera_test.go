package dialects_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dialects"
)

// Galera is a variant of MariaDB: MySQL's family, outside All and Parse,
// with its documented behaviours, each with what the library does and a
// source.
func TestGaleraVariant(t *testing.T) {
	if got := dialects.Family(dialects.Galera); got != dialects.MySQL {
		t.Errorf("Family(Galera) = %q, want mysql", got)
	}
	if slices.Contains(dialects.All(), dialects.Galera) {
		t.Error("All lists Galera, whose statements are MariaDB's")
	}
	if _, err := dialects.Parse("galera"); err == nil {
		t.Error("Parse accepts galera; a store on a node is opened as mariadb")
	}
	bs := dialects.Behaviours(dialects.Galera)
	var text strings.Builder
	for _, b := range bs {
		if b.Topic == "" || b.Server == "" || b.Library == "" || !strings.Contains(b.Source, "MariaDB Galera Cluster docs") {
			t.Errorf("behaviour %+v lacks a field or a source in the MariaDB Galera Cluster docs", b)
		}
		text.WriteString(b.Server + " " + b.Library + " " + b.Source + "\n")
	}
	for _, want := range []string{"GET_LOCK", "errors.ErrUnsupported", "1213", "dao.ErrConflict", "ConflictRetries", "wsrep_sync_wait", "Known Limitations"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("Galera's behaviours do not mention %s", want)
		}
	}
	bs[0].Topic = "changed"
	if dialects.Behaviours(dialects.Galera)[0].Topic == "changed" {
		t.Error("Behaviours returns the table itself, not a copy")
	}
	for _, n := range dialects.All() {
		if b := dialects.Behaviours(n); b != nil {
			t.Errorf("Behaviours(%s) = %v, want nil", n, b)
		}
	}
}
