package workerid

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	a, b := New(), New()
	if a == b {
		t.Fatalf("two ids alike: %q", a)
	}
	if len(a) > 115 {
		t.Fatalf("id %q is %d bytes, want at most 115", a, len(a))
	}
	if !strings.Contains(a, "-"+strconv.Itoa(os.Getpid())+"-") {
		t.Fatalf("id %q does not hold the process id %d", a, os.Getpid())
	}
}
