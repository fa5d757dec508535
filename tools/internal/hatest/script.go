//go:build linux

package hatest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// clusterScript runs one of the repository's cluster scripts
// (scripts/pg-failover.sh, scripts/galera-cluster.sh) with its data
// directory and base port in the environment variables the script reads.
type clusterScript struct {
	name    string // the script's file name, for errors
	path    string // absolute
	dir     string // data directory, in dirEnv
	port    int    // base port, in portEnv
	dirEnv  string
	portEnv string
}

// newClusterScript resolves path and checks that it exists. Errors: an
// empty path, or one that cannot be resolved or does not exist.
func newClusterScript(path, dir, dirEnv string, port int, portEnv string) (*clusterScript, error) {
	if path == "" {
		return nil, fmt.Errorf("no script")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, err
	}
	return &clusterScript{name: filepath.Base(abs), path: abs, dir: dir, port: port, dirEnv: dirEnv, portEnv: portEnv}, nil
}

// run runs the script with args and returns its standard output; the
// error carries its whole output and the data directory.
func (s *clusterScript) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.path, args...)
	cmd.Env = append(os.Environ(), s.dirEnv+"="+s.dir, fmt.Sprintf("%s=%d", s.portEnv, s.port))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("hatest: %s %s: %w\n%s%s(logs under %s)", s.name, strings.Join(args, " "), err, out.String(), errb.String(), s.dir)
	}
	return out.String(), nil
}

// restart removes what a previous run left in the data directory
// ("clean"), checks that the ports base port … +ports-1 are free on
// 127.0.0.1, and starts the cluster ("start"), cleaning up again when the
// start fails.
func (s *clusterScript) restart(ctx context.Context, ports int) error {
	if _, err := s.run(ctx, "clean"); err != nil {
		return err
	}
	for i := range ports {
		if err := portFree("127.0.0.1", s.port+i); err != nil {
			return fmt.Errorf("hatest: %s: %w (a cluster started by hand? %s stop)", s.name, err, s.name)
		}
	}
	if _, err := s.run(ctx, "start"); err != nil {
		_, _ = s.run(context.WithoutCancel(ctx), "clean")
		return err
	}
	return nil
}
