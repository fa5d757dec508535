package driver

// LibraryTable is the optional interface of a model type whose table and
// indexes a library creates and tunes, together with the claim it runs
// on them: the job table of package jobs (jobs.Row, created by
// jobs.Migrate). Such a table is not a user's table: its claim criteria and
// order are known, and the index that serves them exists, so a driver may
// claim on its backend's fast path by default where it would run the
// portable default for a user's table (on MySQL 8.0.1+ and MariaDB 10.6+,
// the SKIP LOCKED locking read and UPDATE by primary key in one READ
// COMMITTED transaction). An explicit strategy given to the store still
// wins.
//
// A driver asks once, when the store is built (see [IsLibraryTable]). The
// method is called on the zero value of the model, so it must not depend
// on a row's fields.
type LibraryTable interface {
	// LibraryTable reports whether the model's table and indexes are
	// created by a library for its own claim (true), or are the user's
	// (false, as for a model without the method).
	LibraryTable() bool
}

// IsLibraryTable reports whether model type T implements [LibraryTable],
// with a value or a pointer receiver, and its zero value says true.
func IsLibraryTable[T any]() bool {
	var zero T
	if l, ok := any(zero).(LibraryTable); ok {
		return l.LibraryTable()
	}
	if l, ok := any(&zero).(LibraryTable); ok {
		return l.LibraryTable()
	}
	return false
}
