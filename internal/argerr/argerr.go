package argerr

import (
	"fmt"

	"github.com/claimstore/claimstore/dao"
)

// Errorf returns an error wrapping dao.ErrInvalidArgument whose text is
// "invalid argument: " followed by format formatted with args, as
// fmt.Sprintf formats them. Verbs of format do not wrap: an error among
// args is kept as text only, and %w is not a verb it knows.
func Errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", dao.ErrInvalidArgument, fmt.Sprintf(format, args...))
}
