package bench_test

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/tools/internal/bench"
)

// Select variants by name, as `claimstore bench --variants` does, and give
// each run of a variant a time budget.
func ExampleParseVariants() {
	names, err := bench.ParseVariants("library,raw,naive")
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := bench.Config{Backend: "memory", Rows: 1000, Workers: 4, Batch: 50, Variants: names[:1], Budget: time.Minute}
	rep, err := bench.Run(context.Background(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	v := rep.Variants[0]
	fmt.Println(names, v.Name, v.Result.Tally.Claimed, v.Result.Partial, rep.Err())

	_, err = bench.ParseVariants("library,slow")
	fmt.Println(err)
	// Output:
	// [library raw naive] library 1000 false <nil>
	// invalid argument: unknown variant "slow" (valid: library, raw, raw-sql, portable, naive, fast, raw-fast)
}
