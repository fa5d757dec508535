package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/outbox"
)

// defaultLogTable is the log `claimstore outbox log` reads unless told
// otherwise: the name docs/outbox.md uses.
const defaultLogTable = "outbox_log"

// logReport is what `claimstore outbox log` prints: every reader's
// cursors with their lag, and the first dead letters.
type logReport struct {
	Table       string            `json:"table"`
	Cursors     []logCursorReport `json:"cursors"`
	DeadLetters []logDeadReport   `json:"dead_letters"`
	// MoreDead says that more dead letters follow the ones listed.
	MoreDead bool `json:"more_dead_letters"`
}

type logCursorReport struct {
	Reader    string `json:"reader"`
	Partition int    `json:"partition"`
	Position  string `json:"position"`
	Term      int64  `json:"term"`
	// Behind is the records after the cursor, counted up to the limit;
	// AtLeast says the count stopped there.
	Behind  int64 `json:"behind"`
	AtLeast bool  `json:"behind_at_least"`
	// OldestAgeMS is how long the oldest record behind has waited, in
	// milliseconds (0 when none).
	OldestAgeMS int64     `json:"oldest_age_ms"`
	Moved       time.Time `json:"cursor_moved_at"`
}

type logDeadReport struct {
	ID        int64     `json:"id"`
	Reader    string    `json:"reader"`
	Partition int       `json:"partition"`
	MessageID string    `json:"message_id"`
	Topic     string    `json:"topic"`
	DeadAt    time.Time `json:"dead_at"`
	LastError string    `json:"last_error"`
}

func newOutboxLogCmd(g *Globals) *cobra.Command {
	var (
		table       string
		limit, dead int
		asJSON      bool
	)
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Show each reader's cursor on an outbox log with its lag, and the dead letters",
		Long: `log shows the ordered message log (the outbox's log mode) named --log-table
on --backend and --dsn (postgres, or sqlite with --dsn naming the file): for
every reader (a relay, a consumer group) and partition, the cursor's
position and fencing term, how many records are behind it (counted up to
--limit, then shown as "N+") and how long the oldest of them has waited;
then the first --dead dead letters. --json prints JSON instead of tables.`,
		Example: `  claimstore outbox log --backend postgres
  claimstore outbox log --backend sqlite --dsn app.db --log-table events_log --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var c FlagChecks
			AtLeast(&c, "limit", limit, 1)
			AtLeast(&c, "dead", dead, 0)
			if c.err != nil {
				return c.err
			}
			rep, err := readLog(cmd.Context(), *g, table, limit, dead)
			if err != nil {
				return err
			}
			return printLogReport(cmd.OutOrStdout(), rep, limit, asJSON)
		},
	}
	cmd.Flags().StringVar(&table, "log-table", defaultLogTable, "the log's message table (its cursors and dead letters are TABLE_cursors and TABLE_dead)")
	cmd.Flags().IntVar(&limit, "limit", 100000, "most records counted behind each cursor")
	cmd.Flags().IntVar(&dead, "dead", 20, "most dead letters listed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// readLog reads the cursors, their lags and up to dead dead letters of
// the log table on --backend and --dsn, g.
func readLog(ctx context.Context, g Globals, table string, limit, dead int) (logReport, error) {
	rep := logReport{Table: table, Cursors: []logCursorReport{}, DeadLetters: []logDeadReport{}}
	name, err := dialects.Parse(strings.ToLower(g.Backend))
	if err != nil || !dialects.LogOffered(name) {
		return rep, fmt.Errorf("%w: --backend %q: the outbox log is on postgres or sqlite", dao.ErrInvalidArgument, g.Backend)
	}
	db, backend, closeDB, err := openDB(ctx, g, false, 2)
	if err != nil {
		return rep, err
	}
	defer closeDB()
	tables := dialects.LogTablesOf(table)
	for _, t := range []string{tables.Log, tables.Cursors, tables.Dead} {
		if !db.WithContext(ctx).Migrator().HasTable(t) {
			return rep, &missingTableError{table: t, backend: backend, kind: "log", fix: "create it with sqlstore.NewLog and Migrate in your program"}
		}
	}
	store, err := sqlstore.NewLog(db, table)
	if err != nil {
		return rep, err
	}
	// The partition count does not matter to the cursors' lags.
	lg, err := outbox.NewLog(store, 1)
	if err != nil {
		return rep, err
	}
	st, err := lg.Status(ctx, limit, dead)
	if err != nil {
		return rep, err
	}
	now := time.Now()
	for _, l := range st.Cursors {
		rep.Cursors = append(rep.Cursors, logCursorReport{
			Reader: l.Reader, Partition: l.Partition, Position: fmt.Sprintf("%d/%d", l.Position.Tx, l.Position.Seq),
			Term: l.Term, Behind: l.Behind, AtLeast: l.AtLeast, OldestAgeMS: l.Age(now).Milliseconds(),
			Moved: l.UpdatedAt,
		})
	}
	rep.MoreDead = st.MoreDead
	for _, dl := range st.DeadLetters {
		rep.DeadLetters = append(rep.DeadLetters, logDeadReport{
			ID: dl.ID, Reader: dl.Reader, Partition: dl.Record.Partition, MessageID: dl.Record.MessageID,
			Topic: dl.Record.Topic, DeadAt: dl.DeadAt, LastError: dl.LastError,
		})
	}
	return rep, nil
}

// printLogReport writes rep as two tables, or as JSON.
func printLogReport(w io.Writer, rep logReport, limit int, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "READER\tPARTITION\tPOSITION\tTERM\tBEHIND\tOLDEST WAITING\tCURSOR MOVED")
	for _, c := range rep.Cursors {
		behind := fmt.Sprint(c.Behind)
		if c.AtLeast {
			behind = fmt.Sprintf("%d+", limit)
		}
		age := "-"
		if c.Behind > 0 {
			age = (time.Duration(c.OldestAgeMS) * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", c.Reader, c.Partition, c.Position, c.Term, behind, age, c.Moved.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Cursors) == 0 {
		fmt.Fprintln(w, "(no reader has a cursor yet)")
	}
	more := ""
	if rep.MoreDead {
		more = ", more follow"
	}
	fmt.Fprintf(w, "\ndead letters: %d listed%s\n", len(rep.DeadLetters), more)
	if len(rep.DeadLetters) == 0 {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tREADER\tPARTITION\tMESSAGE ID\tTOPIC\tDEAD AT\tLAST ERROR")
	for _, d := range rep.DeadLetters {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", d.ID, d.Reader, d.Partition, d.MessageID, d.Topic, d.DeadAt.Format(time.RFC3339), oneLine(d.LastError, 80))
	}
	return tw.Flush()
}
