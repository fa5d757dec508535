package workerid

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// New returns a default worker id: "<hostname>-<pid>-<6 random hex
// digits>", the host name cut to 100 bytes ("worker" when the host has no
// name), so at most 115 bytes for a pid of up to 7 digits.
func New() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	if len(host) > 100 {
		host = host[:100]
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
