// Package syncbuf holds Buffer, a bytes.Buffer that several goroutines may
// write at once: the destination of a slog handler in tests that read a
// component's logs while its goroutines still run.
package syncbuf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer guarded by a mutex. The zero Buffer is empty
// and ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer and returns len(p) and a nil error.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Records decodes what has been written so far as JSON lines (the output
// of a slog.JSONHandler), one map per line, skipping empty lines. The
// error names the first line that is not a JSON object.
func (s *Buffer) Records() ([]map[string]any, error) {
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(s.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return out, fmt.Errorf("syncbuf: log line %q: %w", line, err)
		}
		out = append(out, r)
	}
	return out, nil
}
