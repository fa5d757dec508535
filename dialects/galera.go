package dialects

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"
)

// DetectGalera reports whether db's server is a node of a MariaDB Galera
// Cluster: wsrep_on is ON and a wsrep_provider is loaded (MariaDB Galera
// Cluster docs, "Galera Cluster System Variables"). It asks the server
// with SHOW GLOBAL VARIABLES (one round trip, run with ctx); a MySQL
// server, which has neither variable, and a MariaDB server outside a
// cluster report false. For dialectors other than MySQL's it does no I/O
// and reports false. Errors: the query's, wrapped.
//
// On Galera, row locks and named locks are local to the node that takes
// them, and a write conflicts with another node's only at commit
// (certification), returned as a deadlock (error 1213); GET_LOCK is
// among the features Galera does not support ("Known Limitations").
func DetectGalera(ctx context.Context, db *gorm.DB) (bool, error) {
	if db == nil || db.Dialector == nil || db.Dialector.Name() != "mysql" {
		return false, nil
	}
	var rows []struct {
		VariableName string `gorm:"column:Variable_name"`
		Value        string `gorm:"column:Value"`
	}
	if err := db.WithContext(ctx).Raw("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'wsrep_provider')").Scan(&rows).Error; err != nil {
		return false, fmt.Errorf("dialects: detect galera: %w", err)
	}
	on, provider := false, false
	for _, r := range rows {
		switch strings.ToLower(r.VariableName) {
		case "wsrep_on":
			on = strings.EqualFold(r.Value, "ON")
		case "wsrep_provider":
			provider = r.Value != "" && !strings.EqualFold(r.Value, "none")
		}
	}
	return on && provider, nil
}
