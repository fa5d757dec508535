package driver_test

import (
	"strings"
	"testing"

	"gorm.io/gorm/schema"

	"github.com/claimstore/claimstore/dao/driver"
)

type namedRow struct {
	ID        int64
	QueueName string
	Audit     embedded `gorm:"embedded;embeddedPrefix:audit_"`
	Custom    string   `gorm:"column:custom_col"`
}

type tableNamed struct {
	ID int64
}

func (tableNamed) TableName() string { return "explicit_rows" }

// TestNewModelNamers parses one model type with several naming
// strategies: each model gets the names of its own strategy, whatever was
// parsed before.
func TestNewModelNamers(t *testing.T) {
	for _, tc := range []struct {
		namer   schema.Namer
		table   string
		columns []string
	}{
		{nil, "named_rows", []string{"id", "queue_name", "audit_by", "audit_note", "custom_col"}},
		{schema.NamingStrategy{TablePrefix: "p_"}, "p_named_rows", []string{"id", "queue_name", "audit_by", "audit_note", "custom_col"}},
		{schema.NamingStrategy{SingularTable: true}, "named_row", []string{"id", "queue_name", "audit_by", "audit_note", "custom_col"}},
		{schema.NamingStrategy{NameReplacer: strings.NewReplacer("Queue", "Q")}, "named_rows", []string{"id", "q_name", "audit_by", "audit_note", "custom_col"}},
		{nil, "named_rows", []string{"id", "queue_name", "audit_by", "audit_note", "custom_col"}},
	} {
		m, err := driver.NewModel[namedRow](tc.namer)
		if err != nil {
			t.Fatal(err)
		}
		if m.Table() != tc.table || strings.Join(m.Columns(), ",") != strings.Join(tc.columns, ",") {
			t.Errorf("NewModel with %#v: table %q, columns %v; want %q, %v", tc.namer, m.Table(), m.Columns(), tc.table, tc.columns)
		}
	}
	m, err := driver.NewModel[tableNamed](schema.NamingStrategy{TablePrefix: "p_"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Table() != "explicit_rows" {
		t.Errorf("TableName() model with a prefix: table %q, want explicit_rows (GORM does not prefix TableName)", m.Table())
	}
}

// funcNamer is a naming strategy that cannot be a map key.
type funcNamer struct {
	schema.NamingStrategy
	table func(string) string
}

func (n funcNamer) TableName(s string) string { return n.table(s) }

func TestNewModelUncomparableNamer(t *testing.T) {
	m, err := driver.NewModel[namedRow](funcNamer{table: func(string) string { return "fn_rows" }})
	if err != nil {
		t.Fatal(err)
	}
	if m.Table() != "fn_rows" {
		t.Errorf("table %q, want fn_rows", m.Table())
	}
}
