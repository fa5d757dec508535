package jobadmin

import "github.com/claimstore/claimstore/jobs"

// TreeLine is one line of a workflow drawn as an indented tree
// ([WorkflowTree]).
type TreeLine struct {
	// Task is the index of the line's task in the workflow's Tasks.
	Task int
	// Parent is the index of the task the line is indented under, -1
	// for a line at the top.
	Parent int
	// Depth is the line's indentation: 0 at the top, one more under each
	// dependency.
	Depth int
	// Repeat is true when the task is drawn in full on an earlier line
	// (under another of its dependencies): this line only names it, and
	// its dependents are not drawn again under it.
	Repeat bool
}

// WorkflowTree returns the lines of info's tasks drawn as an indented
// tree, in the order they are drawn: at the top the tasks without a
// listed dependency (a dependency whose job was deleted counts as none),
// each task's dependents under it, by insertion order, depth first. A
// task with several dependencies is drawn in full once, under the first
// of them the walk reaches, and repeated (Repeat, without its
// dependents) under each of the others, so that every dependency shows
// and the tree grows with the number of dependencies, not with the
// number of paths through the workflow. A nil info has no lines.
func WorkflowTree(info *jobs.WorkflowInfo) []TreeLine {
	if info == nil {
		return nil
	}
	byName := make(map[string]int, len(info.Tasks))
	for i, t := range info.Tasks {
		byName[t.Name] = i
	}
	dependents := make([][]int, len(info.Tasks))
	var roots []int
	for i, t := range info.Tasks {
		root := true
		for _, d := range t.Deps {
			if p, ok := byName[d]; ok {
				dependents[p] = append(dependents[p], i)
				root = false
			}
		}
		if root {
			roots = append(roots, i)
		}
	}
	out := make([]TreeLine, 0, len(info.Tasks))
	shown := make([]bool, len(info.Tasks))
	var walk func(i, parent, depth int)
	walk = func(i, parent, depth int) {
		if shown[i] {
			out = append(out, TreeLine{Task: i, Parent: parent, Depth: depth, Repeat: true})
			return
		}
		shown[i] = true
		out = append(out, TreeLine{Task: i, Parent: parent, Depth: depth})
		for _, d := range dependents[i] {
			walk(d, i, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, -1, 0)
	}
	return out
}
