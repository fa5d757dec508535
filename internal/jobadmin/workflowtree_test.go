package jobadmin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/jobs"
)

// TestWorkflowTree: a diamond (d after b and c) is drawn in full under b
// and repeated under c; a task whose only dependency was deleted is at
// the top; a chain keeps its depth.
func TestWorkflowTree(t *testing.T) {
	info := &jobs.WorkflowInfo{ID: "w", Tasks: []jobs.WorkflowTaskInfo{
		{Name: "a"},
		{Name: "b", Deps: []string{"a"}},
		{Name: "c", Deps: []string{"a"}},
		{Name: "d", Deps: []string{"b", "c"}},
		{Name: "x", Deps: []string{"a"}},
		{Name: "y", Deps: []string{"x"}},
		{Name: "z", Deps: []string{"deleted"}},
	}}
	var got []string
	for _, l := range WorkflowTree(info) {
		parent := "-"
		if l.Parent >= 0 {
			parent = info.Tasks[l.Parent].Name
		}
		got = append(got, fmt.Sprintf("%s%s<%s%s", strings.Repeat(" ", l.Depth), info.Tasks[l.Task].Name, parent, map[bool]string{true: " again"}[l.Repeat]))
	}
	want := []string{"a<-", " b<a", "  d<b", " c<a", "  d<c again", " x<a", "  y<x", "z<-"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("tree:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if WorkflowTree(nil) != nil {
		t.Error("tree of nil info")
	}
}
