// Package memstore is the in-process [dao.Store]: rows live in memory, and
// one mutex is held across the read and the write of every claim, so a lost
// race cannot happen ([dao.LostRaceImpossible]). It delegates the claim to
// the portable default ([dao.PortableClaim]) and evaluates criteria with
// [dao.Model.Match]; it is the reference implementation the other adapters
// are compared against, and a convenient store for tests.
//
// Rows are copied in and out, so callers cannot change stored state through
// a returned value (pointer fields are copied shallowly). Unique indexes
// declared in the model's GORM tags are enforced and reported as
// [dao.ErrDuplicate]. Nothing survives the process.
package memstore
