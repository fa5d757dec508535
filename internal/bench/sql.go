package bench

import (
	"context"
	"fmt"

	"github.com/claimstore/claimstore/dao"
)

func runSQL(ctx context.Context, cfg Config) (*Report, error) {
	return nil, fmt.Errorf("bench: %w: backend %s not wired yet", dao.ErrInvalidArgument, cfg.Backend)
}
