package dao_test

import (
	"testing"

	"github.com/claimstore/claimstore/dao"
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
	sx, sy := dao.Eq("status", "x"), dao.Eq("status", "y")
	cases := []struct {
		name string
		c    dao.Criteria
		want []int64
	}{
		{"and-of-wrapped-or", dao.And(dao.Eq("priority", 1), dao.Or(dao.Or(sx, sy))), []int64{1}},
		{"wrapped-or-first", dao.And(dao.Or(dao.Or(sx, sy)), dao.Eq("priority", 1)), []int64{1}},
		{"or-of-wrapped-and", dao.Or(dao.Or(dao.And(dao.Eq("priority", 2), sy)), dao.NotNull("owner")), []int64{3, 4}},
		{"single-operand-or", dao.Or(sy), []int64{3}},
		{"or-with-match-all", dao.Or(sy, dao.And()), []int64{1, 2, 3, 4}},
		{"and-of-and", dao.And(dao.Eq("priority", 2), dao.And(sx, dao.IsNull("owner"))), []int64{2}},
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
