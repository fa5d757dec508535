package bench

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Machine describes where a run measured: the client side, since the
// database server may run elsewhere ([Report.Server] gives its version).
type Machine struct {
	// CPUs is the number of logical CPUs the process can use
	// (runtime.NumCPU).
	CPUs int
	// OS and Arch are runtime.GOOS and runtime.GOARCH.
	OS, Arch string
	// GoVersion is the Go release the binary was built with
	// (runtime.Version).
	GoVersion string
	// Revision is the version-control revision the binary was built from,
	// with "+dirty" when the tree had changes; empty when the build did
	// not record it (go run, go test).
	Revision string
}

// CurrentMachine returns the machine the process runs on.
func CurrentMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				m.Revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if m.Revision != "" && dirty {
			m.Revision += "+dirty"
		}
	}
	return m
}

// String returns the machine on one line, such as "8 CPU cores,
// linux/amd64, go1.26.0".
func (m Machine) String() string {
	s := fmt.Sprintf("%d CPU cores, %s/%s, %s", m.CPUs, m.OS, m.Arch, m.GoVersion)
	if m.Revision != "" {
		s += ", built from " + m.Revision
	}
	return s
}
