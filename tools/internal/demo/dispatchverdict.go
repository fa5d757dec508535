package demo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/cmd/cli"
)

// endSlack is how far past a fire's reported end its outcome write may
// fall: a cron occurrence that passed in between is covered by the fire.
const endSlack = 250 * time.Millisecond

// firing is one fire line and the process that wrote it.
type firing struct {
	cli.Event
	kid *child
}

// DispatchVerdict is the outcome of a dispatch demo run.
type DispatchVerdict struct {
	DueOnce, DueCron     int
	Fires, Failed        int
	ByStep               map[int]int
	Duplicates           int
	RefiredAfterKill     int
	MissedOnce           int
	MissedCron           int
	TerminalFailed       int64
	ReleasedByDrain      int64 // by the process sent SIGTERM mid-run
	ReleasedAtEnd        int64 // by the processes stopped at the end
	LagP50, LagP99       time.Duration
	DuplicateExamples    []string
	MissedCronExamples   []string
	ReadyzAfterSIGTERM   string
	FiresPerProcess      map[string]int
	ProcessFates         map[string]string
	TableFiredOnce       int64
	OnceKeysNeverFiredOK []string
}

// OK reports whether the verdict holds: every once schedule fired, no
// cron occurrence missed, nothing fired twice, nothing failed for good,
// and readiness did not stay 200 after SIGTERM.
func (v *DispatchVerdict) OK(once int) bool {
	return !strings.Contains(v.ReadyzAfterSIGTERM, "FAILED") && v.Duplicates == 0 && v.MissedOnce == 0 && v.MissedCron == 0 && v.TerminalFailed == 0 && v.TableFiredOnce == int64(once)
}

// verdict computes and prints the verdict.
func (r *dispatchRun) verdict(ctx context.Context) error {
	v, err := r.compute(ctx)
	if err != nil {
		return err
	}
	out := r.out
	fmt.Fprintln(out)
	for _, c := range r.kids {
		fate := v.ProcessFates[c.id]
		fmt.Fprintf(out, "  %-16s fires %5d  %s\n", c.id, v.FiresPerProcess[c.id], fate)
	}
	fmt.Fprintf(out, "readyz right after SIGTERM: %s\n", v.ReadyzAfterSIGTERM)
	fmt.Fprintf(out, "due occurrences: %d (%d once, %d cron in the window)\n", v.DueOnce+v.DueCron, v.DueOnce, v.DueCron)
	fmt.Fprintf(out, "fires: %d (%d succeeded, %d failed on purpose)\n", v.Fires+v.Failed, v.Fires, v.Failed)
	var steps []string
	keys := make([]int, 0, len(v.ByStep))
	for k := range v.ByStep {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		steps = append(steps, fmt.Sprintf("step %d: %d", k, v.ByStep[k]))
	}
	if len(steps) == 0 {
		steps = []string{"none"}
	}
	fmt.Fprintf(out, "failures by ladder step: %s; failed for good: %d\n", strings.Join(steps, ", "), v.TerminalFailed)
	fmt.Fprintf(out, "duplicates %d (occurrences fired again after the SIGKILL, whose outcome the killed process never wrote: %d)\n", v.Duplicates, v.RefiredAfterKill)
	fmt.Fprintf(out, "missed %d (once %d, cron %d); once schedules fired in the table: %d of %d\n",
		v.MissedOnce+v.MissedCron, v.MissedOnce, v.MissedCron, v.TableFiredOnce, r.o.Once)
	fmt.Fprintf(out, "leases released by the drain: %d (SIGTERM mid-run), %d (the processes stopped at the end)\n", v.ReleasedByDrain, v.ReleasedAtEnd)
	fmt.Fprintf(out, "lag p50 %v, p99 %v\n", v.LagP50, v.LagP99)
	for _, d := range v.DuplicateExamples {
		fmt.Fprintf(out, "  duplicate: %s\n", d)
	}
	for _, m := range v.MissedCronExamples {
		fmt.Fprintf(out, "  missed cron occurrence: %s\n", m)
	}
	if !v.OK(r.o.Once) {
		fmt.Fprintln(out, "verdict: FAILED")
		return errors.New("dispatch demo: the verdict does not hold")
	}
	fmt.Fprintln(out, "verdict: OK: every due occurrence fired, none twice")
	return nil
}

func (r *dispatchRun) compute(ctx context.Context) (*DispatchVerdict, error) {
	v := &DispatchVerdict{ByStep: map[int]int{}, FiresPerProcess: map[string]int{}, ProcessFates: map[string]string{},
		DueOnce: r.o.Once, ReadyzAfterSIGTERM: r.readyz}
	var all []firing
	for _, c := range r.kids {
		stopped := false
		for _, e := range c.events {
			switch e.Type {
			case "fire":
				all = append(all, firing{e, c})
				v.FiresPerProcess[c.id]++
			case "stop":
				stopped = true
				if e.Stats != nil {
					if c.fate == "SIGTERM" {
						v.ReleasedByDrain += e.Stats.Released
					} else {
						v.ReleasedAtEnd += e.Stats.Released
					}
				}
			}
		}
		switch {
		case c.fate == "SIGKILL":
			v.ProcessFates[c.id] = "SIGKILL mid-run"
		case c.fate == "SIGTERM" && stopped:
			v.ProcessFates[c.id] = "SIGTERM mid-run, drained"
		case stopped:
			v.ProcessFates[c.id] = "ran to the end, drained"
		default:
			v.ProcessFates[c.id] = "exited without its stop line"
		}
	}
	okOnce := map[string]bool{}
	byOcc := map[string][]firing{}
	byCron := map[string][]firing{}
	lags := make([]float64, 0, len(all))
	for _, f := range all {
		lags = append(lags, f.Lag)
		if f.OK {
			v.Fires++
		} else {
			v.Failed++
			v.ByStep[f.Attempt]++
		}
		if !f.Cron && f.OK {
			okOnce[f.Key] = true
		}
		if f.Cron {
			byCron[f.Key] = append(byCron[f.Key], f)
		}
		occ := f.Key + "@" + f.Due.UTC().Format(time.RFC3339Nano)
		byOcc[occ] = append(byOcc[occ], f)
	}
	for occ, fs := range byOcc {
		if len(fs) < 2 {
			continue
		}
		killed := 0
		for _, f := range fs {
			if f.kid.fate == "SIGKILL" {
				killed++
			}
		}
		if killed == 1 && len(fs) == 2 {
			v.RefiredAfterKill++
			continue
		}
		v.Duplicates++
		if len(v.DuplicateExamples) < 5 {
			var by []string
			for _, f := range fs {
				by = append(by, f.kid.id)
			}
			v.DuplicateExamples = append(v.DuplicateExamples, occ+" by "+strings.Join(by, ", "))
		}
	}
	for i := range r.o.Once {
		k := fmt.Sprintf("once-%05d", i)
		if !okOnce[k] {
			v.MissedOnce++
			v.OnceKeysNeverFiredOK = append(v.OnceKeysNeverFiredOK, k)
		}
	}
	// Cron occurrences: every second from the first to two seconds before
	// the pause (the last ones may not have been claimed yet).
	last := r.pauseAt.Add(-2 * time.Second)
	for i := range r.o.Cron {
		k := fmt.Sprintf("cron-%03d", i)
		fs := byCron[k]
		sort.Slice(fs, func(a, b int) bool { return fs[a].Due.Before(fs[b].Due) })
		for s := r.cronAt; !s.After(last); s = s.Add(time.Second) {
			v.DueCron++
			if !covered(fs, s) {
				v.MissedCron++
				if len(v.MissedCronExamples) < 5 {
					v.MissedCronExamples = append(v.MissedCronExamples, k+"@"+s.Format(time.RFC3339))
				}
			}
		}
	}
	if len(lags) > 0 {
		sort.Float64s(lags)
		v.LagP50 = pct(lags, 0.50)
		v.LagP99 = pct(lags, 0.99)
	}
	var err error
	if v.TableFiredOnce, err = r.store.Count(ctx, dao.And(dao.Eq(dispatch.ColKind, string(dispatch.KindOnce)), dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired)))); err != nil {
		return nil, err
	}
	if v.TerminalFailed, err = r.store.Count(ctx, dao.Eq(dispatch.ColStatus, string(dispatch.StatusFailed))); err != nil {
		return nil, err
	}
	return v, nil
}

// covered reports whether the cron occurrence s is accounted for by the
// fires fs (sorted by due time): a fire claimed for s or for an earlier
// occurrence whose run lasted past s (the next due time is the next
// occurrence after the fire ended), or a failed fire's retry wait that
// spans s (the retry fires in its place).
func covered(fs []firing, s time.Time) bool {
	for i, f := range fs {
		if !f.Due.After(s) && !s.After(f.End.Add(endSlack)) {
			return true
		}
		if !f.OK && !s.Before(f.End) && (i == len(fs)-1 || s.Before(fs[i+1].Due)) {
			return true
		}
	}
	return false
}

// pct returns the q-quantile of sorted lags in seconds (nearest rank).
func pct(sorted []float64, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return time.Duration(sorted[i] * float64(time.Second)).Round(time.Millisecond)
}
