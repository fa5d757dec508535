package outbox_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/claimstore/claimstore/outbox"
	"gorm.io/gorm/schema"
)

// The exported column names are those GORM gives Message's fields, all of
// them, in field order: a new field without its constant fails here.
func TestColumnsAreTheSchemas(t *testing.T) {
	s, err := schema.Parse(&outbox.Message{}, &sync.Map{}, schema.NamingStrategy{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range s.Fields {
		if f.DBName != "" {
			want = append(want, f.DBName)
		}
	}
	if got := outbox.Columns(); !slices.Equal(got, want) {
		t.Fatalf("outbox.Columns() = %v\nschema of Message  = %v", got, want)
	}
}
