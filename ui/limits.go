package ui

import (
	"context"

	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
)

// limitPartitions is the most partitions the queues page shows per
// limited queue, the most running first.
const limitPartitions = 10

// limitsOf reads the limited queues of c's job table.
func limitsOf(ctx context.Context, c *jobs.Client) ([]jobadmin.Limit, error) {
	infos, err := c.Limits(ctx, jobs.LimitParams{Partitions: limitPartitions})
	if err != nil {
		return nil, err
	}
	out := make([]jobadmin.Limit, len(infos))
	for i, in := range infos {
		out[i] = jobadmin.LimitView(in)
	}
	return out, nil
}
