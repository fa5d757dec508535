package sqlstore

// The internals that the external tests of this package check with the
// backends registered (they import the backend packages, which import
// this one).
var (
	MapCtxError        = mapCtxError
	ClassifyClaimWrite = classifyClaimWrite
	ExecOutcome        = execOutcome
	ConnPool           = connPool
	RepeatedWallClock  = repeatedWallClock
)
