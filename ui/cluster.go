package ui

import (
	"context"
	"sync"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dialects"
)

// ClusterState is the state of the MariaDB Galera Cluster node that
// [Config].DB reaches, as the overview's Cluster panel shows it and
// api/overview returns it (field "cluster"): the node's own state, its
// component (Primary or not), the component's size and members, the
// membership changes so far and the node's certification failures and
// brute-force aborts, read from its wsrep status variables
// ([dialects.GaleraStatus]), and whether it serves clients.
type ClusterState struct {
	dialects.GaleraNode
	// Serving reports whether the node serves clients as a full member:
	// ready, connected, in the primary component and synced
	// ([dialects.GaleraNode.Serving]). The panel is shown in its warning
	// style when it is false, which covers a component that is not
	// Primary.
	Serving bool `json:"serving"`
	// Error is set when the state could not be read (the node is down or
	// unreachable, or no longer a Galera node); the other fields are then
	// zero.
	Error string `json:"error,omitempty"`
}

// clusterWatch reads the cluster state of one database for the overview.
// It asks the database once whether it is a Galera node and remembers
// the answer: a database that is not one is sent nothing more.
type clusterWatch struct {
	db *gorm.DB

	mu       sync.Mutex
	detected bool // the detection answered; galera holds its answer
	galera   bool
}

// isGalera reports whether w's database is a Galera node, asking it
// (dialects.DetectGalera: one round trip on MySQL's dialector, none on
// the others) until it has answered once. Callers wait for a detection
// under way. Errors: the detection's; it runs again at the next call.
func (w *clusterWatch) isGalera(ctx context.Context) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.detected {
		return w.galera, nil
	}
	on, err := dialects.DetectGalera(ctx, w.db)
	if err != nil {
		return false, err
	}
	w.detected, w.galera = true, on
	return on, nil
}

// state returns the node's state, or nil when w is nil or its database is
// not a Galera node. A failed read of a Galera node's status is a state
// with its Error set. Errors: the detection's.
func (w *clusterWatch) state(ctx context.Context) (*ClusterState, error) {
	if w == nil {
		return nil, nil
	}
	on, err := w.isGalera(ctx)
	if err != nil || !on {
		return nil, err
	}
	n, err := dialects.GaleraStatus(ctx, w.db)
	if err != nil {
		return &ClusterState{GaleraNode: dialects.GaleraNode{Members: []string{}}, Error: err.Error()}, nil
	}
	return &ClusterState{GaleraNode: *n, Serving: n.Serving()}, nil
}

// cluster returns the state the overview shows, or nil; a failed
// detection is logged at Debug and shows nothing (the tables show the
// database's errors).
func (h *Handler) cluster(ctx context.Context) *ClusterState {
	s, err := h.clusterWatch.state(ctx)
	if err != nil {
		h.cfg.Logger.Debug("ui: detect a Galera node", "err", err)
	}
	return s
}

// Cluster returns the state of the MariaDB Galera Cluster node that
// [Config].DB reaches, as the overview shows it, read with ctx bounded
// by [Config].Timeout: two round trips (dialects.GaleraStatus). It
// returns nil when [Config].DB is nil or is not a Galera node (asked once
// per Handler, on the first call or overview), and when that detection
// fails (it runs again at the next call). A failed read of the node's
// status is returned with its Error set.
func (h *Handler) Cluster(ctx context.Context) *ClusterState {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	return h.cluster(ctx)
}
