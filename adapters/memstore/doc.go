// Package memstore is the in-process backend of claimstore: [New] returns
// the portable store ([dao.Table]) over a driver whose rows live in memory.
// Its claim holds one mutex across the read and the writes
// ([dao.StrategyFastPath]), so a lost race cannot happen
// ([dao.LostRaceImpossible]); with [dao.StrategyPortable] it runs the
// portable default, whose guarded writes skip a row another claimer took.
// Criteria are evaluated by driver.Model.Match; it is the reference
// implementation the other backends are compared against, and a
// convenient store for tests.
//
// Rows are copied in and out, so callers cannot change stored state through
// a returned value (pointer fields are copied shallowly). Unique indexes
// declared in the model's GORM tags are enforced and reported as
// [dao.ErrDuplicate]. Nothing survives the process.
package memstore
