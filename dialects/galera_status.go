package dialects

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"
)

// ErrNotGalera is returned by [GaleraStatus] for a server that is not a
// node of a MariaDB Galera Cluster ([DetectGalera] false).
var ErrNotGalera = errors.New("dialects: not a MariaDB Galera Cluster node (wsrep_on is OFF or no wsrep_provider)")

// GaleraNode is one node's view of its MariaDB Galera Cluster, read
// from the node's wsrep status variables (MariaDB Galera Cluster docs,
// "Galera Cluster Status Variables").
type GaleraNode struct {
	// ClusterSize is the number of nodes in the node's component
	// (wsrep_cluster_size).
	ClusterSize int `json:"clusterSize"`
	// ClusterStatus is "Primary" when the node's component has quorum
	// and takes writes, else "non-Primary" or "Disconnected"
	// (wsrep_cluster_status).
	ClusterStatus string `json:"clusterStatus"`
	// LocalState is the node's own state: "Synced" when it serves
	// clients in step with the cluster, else "Joining", "Joined",
	// "Donor/Desynced" or "Initialized" (wsrep_local_state_comment).
	LocalState string `json:"localState"`
	// Ready reports whether the node accepts queries (wsrep_ready);
	// Connected whether it is connected to a cluster (wsrep_connected).
	Ready     bool `json:"ready"`
	Connected bool `json:"connected"`
	// Members are the client addresses of the component's nodes
	// (wsrep_incoming_addresses): each node's
	// wsrep_node_incoming_address, "AUTO" for a node where it is not
	// set.
	Members []string `json:"members"`
	// ConfID counts the membership changes the cluster went through
	// (wsrep_cluster_conf_id).
	ConfID int64 `json:"confId"`
	// CertFailures counts this node's transactions that failed
	// certification, and BFAborts its transactions aborted by a
	// replicated write set, since the node started
	// (wsrep_local_cert_failures, wsrep_local_bf_aborts): claimstore
	// sees both as deadlock errors and retries them.
	CertFailures int64 `json:"certFailures"`
	BFAborts     int64 `json:"bfAborts"`
	// FlowControlPaused is the fraction of time since the status was
	// last reset that replication was paused by flow control, 0 to 1
	// (wsrep_flow_control_paused).
	FlowControlPaused float64 `json:"flowControlPaused"`
}

// Serving reports whether the node serves clients as a full member:
// ready, connected, in the primary component and synced. A node that
// does not (cut off from the primary component, joining, or a donor)
// refuses or delays the library's writes.
func (n *GaleraNode) Serving() bool {
	return n.Ready && n.Connected && n.ClusterStatus == "Primary" && n.LocalState == "Synced"
}

// GaleraStatus reads the state of the Galera node db is connected to,
// with ctx: SHOW GLOBAL VARIABLES to check that it is a Galera node
// ([DetectGalera]), then SHOW GLOBAL STATUS LIKE 'wsrep%'. Each
// connection of a pool may reach another node behind a proxy; the
// answer is that of the one that served the query. Errors:
// [ErrNotGalera] for another server (other dialectors included), the
// queries' errors, wrapped.
func GaleraStatus(ctx context.Context, db *gorm.DB) (*GaleraNode, error) {
	on, err := DetectGalera(ctx, db)
	if err != nil {
		return nil, err
	}
	if !on {
		return nil, ErrNotGalera
	}
	var rows []struct {
		VariableName string `gorm:"column:Variable_name"`
		Value        string `gorm:"column:Value"`
	}
	if err := db.WithContext(ctx).Raw("SHOW GLOBAL STATUS LIKE 'wsrep%'").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("dialects: galera status: %w", err)
	}
	n := &GaleraNode{Members: []string{}}
	for _, r := range rows {
		v := strings.TrimSpace(r.Value)
		num := func() int64 { i, _ := strconv.ParseInt(v, 10, 64); return i }
		switch strings.ToLower(r.VariableName) {
		case "wsrep_cluster_size":
			n.ClusterSize = int(num())
		case "wsrep_cluster_status":
			n.ClusterStatus = v
		case "wsrep_local_state_comment":
			n.LocalState = v
		case "wsrep_ready":
			n.Ready = strings.EqualFold(v, "ON")
		case "wsrep_connected":
			n.Connected = strings.EqualFold(v, "ON")
		case "wsrep_incoming_addresses":
			for _, a := range strings.Split(v, ",") {
				if a = strings.TrimSpace(a); a != "" {
					n.Members = append(n.Members, a)
				}
			}
		case "wsrep_cluster_conf_id":
			n.ConfID = num()
		case "wsrep_local_cert_failures":
			n.CertFailures = num()
		case "wsrep_local_bf_aborts":
			n.BFAborts = num()
		case "wsrep_flow_control_paused":
			n.FlowControlPaused, _ = strconv.ParseFloat(v, 64)
		}
	}
	return n, nil
}
