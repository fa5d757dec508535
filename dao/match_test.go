package dao

import (
	"testing"
)

// Match evaluates the tree's structure: a compound operand, also behind
// single-operand And and Or wrappers, is one operand.
func TestMatchCompoundOperands(t *testing.T) {
	m := model(t)
	owner := func(s string) *string { return &s }
	rows := []row{
		{ID: 1, Priority: 1, Status: "x"},
		{ID: 2, Priority: 2, Status: "x"},
		{ID: 3, Priority: 2, Status: "y"},
		{ID: 4, Priority: 1, Status: "z", Owner: owner("w")},
	}
	sx, sy := Eq("status", "x"), Eq("status", "y")
	cases := []struct {
		name string
		c    Criteria
		want []int64
	}{
		{"and-of-wrapped-or", And(Eq("priority", 1), Or(Or(sx, sy))), []int64{1}},
		{"wrapped-or-first", And(Or(Or(sx, sy)), Eq("priority", 1)), []int64{1}},
		{"or-of-wrapped-and", Or(Or(And(Eq("priority", 2), sy)), NotNull("owner")), []int64{3, 4}},
		{"single-operand-or", Or(sy), []int64{3}},
		{"or-with-match-all", Or(sy, And()), []int64{1, 2, 3, 4}},
		{"and-of-and", And(Eq("priority", 2), And(sx, IsNull("owner"))), []int64{2}},
	}
	for _, c := range cases {
		checked, err := m.CheckCriteria(c.c)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []int64
		for i := range rows {
			if m.Match(&rows[i], checked) {
				got = append(got, rows[i].ID)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: %v matches %v, want %v", c.name, c.c, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: %v matches %v, want %v", c.name, c.c, got, c.want)
				break
			}
		}
	}
}
