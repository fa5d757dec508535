package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/claimstore/claimstore/dao"
)

// Names that select variants in [Config.Variants] (and in the --variants
// flag of `claimstore-dev bench`). One name can stand for a different variant
// on each backend; see [VariantNames].
const (
	// SelectLibrary selects the library's Store.Claim on its default path
	// ([VariantLibrary]).
	SelectLibrary = "library"
	// SelectRaw selects the raw-driver baseline the library is compared
	// with: raw pgx on PostgreSQL ([VariantRawPgx]), raw database/sql
	// elsewhere ([VariantRawSQL]).
	SelectRaw = "raw"
	// SelectRawSQL selects the library's statement run with database/sql
	// ([VariantRawSQL]); on every backend but PostgreSQL it is the same
	// variant as SelectRaw.
	SelectRawSQL = "raw-sql"
	// SelectPortable selects the library with its fast path switched off
	// ([VariantLibraryPortable]), on backends whose default is the fast
	// path (PostgreSQL and SQLite).
	SelectPortable = "portable"
	// SelectNaive selects the hand-written SELECT followed by one guarded
	// UPDATE per row ([VariantNaive]).
	SelectNaive = "naive"
	// SelectFast selects the library with its opt-in fast path switched on
	// ([VariantLibraryFast]), on backends where it is off by default
	// (MySQL, MariaDB).
	SelectFast = "fast"
	// SelectRawFast selects the opt-in fast path's statements run with
	// database/sql ([VariantRawSQLFast]), where SelectFast applies.
	SelectRawFast = "raw-fast"
)

// VariantNames returns every name [Config.Variants] accepts, in the order
// a run measures the variants they select.
func VariantNames() []string {
	return []string{SelectLibrary, SelectRaw, SelectRawSQL, SelectPortable, SelectNaive, SelectFast, SelectRawFast}
}

// DefaultVariants returns the variants a run measures when
// [Config.Variants] is empty and [Config.Baseline] is false: the library
// and its raw-driver baseline.
func DefaultVariants() []string { return []string{SelectLibrary, SelectRaw} }

// BaselineVariants returns the variants [Config.Baseline] selects: every
// variant but the library with its fast path off. A backend measures
// those of them it has (see [VariantNames]).
func BaselineVariants() []string {
	return []string{SelectLibrary, SelectRaw, SelectRawSQL, SelectNaive, SelectFast, SelectRawFast}
}

// ParseVariants splits a comma-separated list of variant names, such as
// "library,raw,naive", trimming spaces and dropping repeats. It returns an
// error wrapping [dao.ErrInvalidArgument] that lists the valid names when
// a name is unknown or the list names none.
func ParseVariants(list string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(VariantNames(), n) {
			return nil, fmt.Errorf("%w: unknown variant %q (valid: %s)", dao.ErrInvalidArgument, n, strings.Join(VariantNames(), ", "))
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no variant named (valid: %s)", dao.ErrInvalidArgument, strings.Join(VariantNames(), ", "))
	}
	return names, nil
}

// selection is the set of variant names a run measures. Names the caller
// asked for by name are explicit: a backend that lacks one of them says
// so in a note, while a name only the Baseline alias brought in is left
// out without one.
type selection struct {
	names    map[string]bool
	explicit map[string]bool
}

// selection resolves c.Variants, c.Baseline and c.Portable into the
// names to measure; c.check has validated the names.
func (c Config) selection() selection {
	s := selection{names: map[string]bool{}, explicit: map[string]bool{}}
	for _, n := range c.Variants {
		s.names[n], s.explicit[n] = true, true
	}
	if c.Baseline {
		for _, n := range BaselineVariants() {
			s.names[n] = true
		}
	}
	if c.Portable {
		s.names[SelectPortable], s.explicit[SelectPortable] = true, true
	}
	if len(c.Variants) == 0 && !c.Baseline {
		for _, n := range DefaultVariants() {
			s.names[n], s.explicit[n] = true, true
		}
	}
	return s
}

// has reports whether name is selected.
func (s selection) has(name string) bool { return s.names[name] }

// list returns the selected names in [VariantNames] order.
func (s selection) list() []string {
	var out []string
	for _, n := range VariantNames() {
		if s.names[n] {
			out = append(out, n)
		}
	}
	return out
}

// unavailable returns a note saying that name does not run on backend and
// why, or "" when name is not selected by name.
func (s selection) unavailable(name, backend, why string) string {
	if !s.explicit[name] {
		return ""
	}
	return fmt.Sprintf("%s not measured: %s %s", name, backend, why)
}
