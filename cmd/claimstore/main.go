// Command claimstore is the command-line tool of the claimstore library:
// it runs the demo, the outbox relay and its inspection commands, and the
// claim benchmark against any supported backend. Run `claimstore help` for
// the list of commands and their flags.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := rootCmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, errorText(err))
		os.Exit(1)
	}
}
