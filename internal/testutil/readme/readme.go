// Package readme holds the test helper that keeps a Markdown file's Go
// snippets identical to the code that compiles them.
package readme

import (
	"os"
	"strings"
	"testing"
)

// Holds checks that each Go declaration of file that begins with one of
// starts (such as "type Job struct" or "func claimJobs(") appears verbatim
// in one of the ```go code blocks of the Markdown file md. A file that
// cannot be read or lacks a declaration fails t at once; a declaration no
// block holds is reported with t.Errorf.
func Holds(t testing.TB, md, file string, starts ...string) {
	t.Helper()
	doc, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, part := range strings.Split(string(doc), "```go\n")[1:] {
		blocks = append(blocks, part[:strings.Index(part, "```")])
	}
	for _, start := range starts {
		i := strings.Index(string(src), "\n"+start)
		if i < 0 {
			t.Fatalf("%s has no declaration %q", file, start)
		}
		decl := string(src[i+1:])
		decl = decl[:strings.Index(decl, "\n}\n")+3]
		found := false
		for _, b := range blocks {
			found = found || strings.Contains(b, decl)
		}
		if !found {
			t.Errorf("no Go block of %s holds this declaration of %s:\n%s", md, file, decl)
		}
	}
}
