package driver

import "errors"

// The error sentinels of claimstore. Package dao exports the same values
// under the same names for users; a driver wraps one of them, together
// with its backend's native error, in every error it returns.
var (
	ErrNotFound        = errors.New("not found")
	ErrInvalidArgument = errors.New("invalid argument")
	ErrBusy            = errors.New("database busy")
	ErrConflict        = errors.New("conflict")
	ErrDuplicate       = errors.New("duplicate key")
	ErrUnavailable     = errors.New("backend unavailable")
	ErrInTransaction   = errors.New("claim inside an open transaction")
)
