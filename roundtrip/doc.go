// Package roundtrip forwards to internal/roundtrip, the round-trip counting
// driver hook. The hook is tooling of this module's tests and benchmarks,
// not a user feature, and lives under internal/; this package remains only
// while some of the module's tests still import it by its old path, and
// will be removed when they have moved (it carries no formal deprecation
// notice so that those tests stay lint-clean until then). New code imports
// internal/roundtrip.
package roundtrip
