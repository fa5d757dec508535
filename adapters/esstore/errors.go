package esstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/claimstore/claimstore/dao"
)

// Error is an error response of Elasticsearch: the HTTP status and the
// error object of the body ({"error": {"type": …, "reason": …}, "status": …}).
// Every error the store returns for a non-2xx response wraps an *Error next
// to the dao sentinel it maps to; reach it with errors.As.
type Error struct {
	// Status is the HTTP status code of the response, such as 404 or 409.
	Status int
	// Type is the Elasticsearch exception type, such as
	// "version_conflict_engine_exception" or "index_not_found_exception";
	// empty when the body carried no error object.
	Type string
	// Reason is the human-readable reason Elasticsearch gave.
	Reason string
	// RootCause is the type of the first root cause, when the body has one
	// that differs from Type.
	RootCause string
	// Body is the raw response body, at most 4096 bytes of it.
	Body []byte
}

// Error renders the status, the type and the reason.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "elasticsearch: %d %s", e.Status, http.StatusText(e.Status))
	if e.Type != "" {
		fmt.Fprintf(&b, ": %s", e.Type)
	}
	if e.RootCause != "" && e.RootCause != e.Type {
		fmt.Fprintf(&b, " (root cause %s)", e.RootCause)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, ": %s", e.Reason)
	}
	return b.String()
}

// errorBody is the error object of an Elasticsearch error response. Some
// APIs (GET of a missing document) answer 404 without it.
type errorBody struct {
	Error  *errorCause `json:"error"`
	Status int         `json:"status"`
}

type errorCause struct {
	Type      string       `json:"type"`
	Reason    string       `json:"reason"`
	RootCause []errorCause `json:"root_cause"`
	CausedBy  *errorCause  `json:"caused_by"`
}

const maxErrorBody = 4096

// parseError builds an *Error from a response status and body.
func parseError(status int, body []byte) *Error {
	e := &Error{Status: status}
	if len(body) > maxErrorBody {
		e.Body = append([]byte(nil), body[:maxErrorBody]...)
	} else {
		e.Body = append([]byte(nil), body...)
	}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
		e.Type, e.Reason = eb.Error.Type, eb.Error.Reason
		if len(eb.Error.RootCause) > 0 {
			e.RootCause = eb.Error.RootCause[0].Type
		}
	}
	return e
}

// causeError builds an *Error from an error object found inside a 2xx
// response (a bulk item, an update-by-query failure).
func causeError(status int, c errorCause, raw []byte) *Error {
	e := &Error{Status: status, Type: c.Type, Reason: c.Reason}
	if len(c.RootCause) > 0 {
		e.RootCause = c.RootCause[0].Type
	} else if c.CausedBy != nil {
		e.RootCause = c.CausedBy.Type
	}
	if len(raw) > maxErrorBody {
		raw = raw[:maxErrorBody]
	}
	e.Body = append([]byte(nil), raw...)
	return e
}

// invalidInputTypes are the 400 exception types caused by the values of a
// document or of a query argument, that is by the caller's input: a value
// the mapping cannot take, a term too long to index.
var invalidInputTypes = map[string]bool{
	"mapper_parsing_exception":            true,
	"document_parsing_exception":          true,
	"strict_dynamic_mapping_exception":    true,
	"illegal_argument_exception":          true,
	"max_bytes_length_exceeded_exception": true,
}

// sentinel returns the dao error an Elasticsearch error maps to, or nil
// when none fits. It is the one place where native errors meet the dao
// taxonomy:
//
//	404                          -> dao.ErrNotFound
//	409                          -> dao.ErrConflict
//	400 caused by a value        -> dao.ErrInvalidArgument
//	429                          -> dao.ErrBusy
//	502, 503, 504                -> dao.ErrUnavailable
func sentinel(e *Error) error {
	switch e.Status {
	case http.StatusNotFound:
		return dao.ErrNotFound
	case http.StatusConflict:
		return dao.ErrConflict
	case http.StatusBadRequest:
		if invalidInputTypes[e.Type] || invalidInputTypes[e.RootCause] {
			return dao.ErrInvalidArgument
		}
	case http.StatusTooManyRequests:
		return dao.ErrBusy
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return dao.ErrUnavailable
	}
	return nil
}

// wrapES returns an error for op that wraps both the mapped sentinel (if
// any) and e.
func wrapES(op string, e *Error) error {
	if s := sentinel(e); s != nil {
		return fmt.Errorf("%s: %w: %w", op, s, e)
	}
	return fmt.Errorf("%s: %w", op, e)
}

// wrapTransport maps an error of the HTTP transport (no response at all):
// context cancellation and deadline pass through; anything else, such as a
// refused or reset connection, is dao.ErrUnavailable.
func wrapTransport(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%s: %w: %w", op, ctxErr, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, dao.ErrUnavailable, err)
}
