package demo

import (
	"io"
	"reflect"
	"sync"
)

// SyncWriter serialises the writes to W: the standard error of several
// child processes (os/exec copies each from a goroutine of its own) and
// the progress lines can share one writer.
type SyncWriter struct {
	mu sync.Mutex
	W  io.Writer
}

// Write writes p to W under the lock and returns W's result.
func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(p)
}

// SyncPair returns logs wrapped in a [SyncWriter], and progress: the same
// SyncWriter when progress is the same writer as logs, else progress
// unchanged.
func SyncPair(progress, logs io.Writer) (io.Writer, io.Writer) {
	s := &SyncWriter{W: logs}
	if t := reflect.TypeOf(progress); t == reflect.TypeOf(logs) && t != nil && t.Comparable() && progress == logs {
		return s, s
	}
	return progress, s
}
