//go:build !linux

package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
)

// newSoakCmd returns the soak command of a system other than Linux, which
// refuses to run.
func newSoakCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "soak",
		Short: "The chaos soak (Linux only)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%w: the soak runs on Linux only (its children get a parent-death signal and its faults use SIGSTOP); this is %s", dao.ErrInvalidArgument, runtime.GOOS)
		},
	}
}
