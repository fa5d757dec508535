package cli

import (
	"fmt"

	"github.com/spf13/pflag"
)

// DeprecatedAlias adds to f the flag old, sharing the value of the flag
// name that f already defines: setting either sets both. old is hidden
// from the help and, when given, prints "Flag --old has been deprecated,
// use --name instead" on stderr. It panics when f has no flag name, a
// programming error of the command that calls it.
func DeprecatedAlias(f *pflag.FlagSet, old, name string) {
	cur := f.Lookup(name)
	if cur == nil {
		panic(fmt.Sprintf("cli: deprecated alias --%s of --%s: no flag --%s", old, name, name))
	}
	f.AddFlag(&pflag.Flag{Name: old, Usage: cur.Usage, Value: cur.Value, DefValue: cur.DefValue, NoOptDefVal: cur.NoOptDefVal})
	if err := f.MarkDeprecated(old, "use --"+name+" instead"); err != nil {
		panic(err)
	}
}
