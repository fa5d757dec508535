package main

import (
	"os"
	"testing"
)

// TestMain runs the command line instead of the tests when the dispatch
// demo starts this test binary as one of its worker processes.
func TestMain(m *testing.M) {
	if os.Getenv(envChildCLI) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
