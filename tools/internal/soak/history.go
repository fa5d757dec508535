//go:build linux

package soak

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Event kinds written to the histories.
const (
	// orchestrator
	EvSpawn    = "spawn"    // a process started: Proc, Pid
	EvExit     = "exit"     // a process ended: Proc, Err
	EvFault    = "fault"    // a fault injected: Fault, Target, N
	EvRecover  = "recover"  // the backlog of a fault is done: Target (the fault's Seq), Dur
	EvLoadEnd  = "load-end" // producers stopped
	EvDrained  = "drained"  // every job, message and once schedule is done
	EvSnapshot = "snapshot" // periodic totals: N (jobs done), M (messages published)
	EvWorkflow = "workflow" // a workflow inserted: Target (its label), Key (its id), N (tasks), Err (the insert failed)

	// producers
	EvBegin  = "begin"  // a transaction is about to commit: Orders
	EvCommit = "commit" // it committed: Orders
	EvAbort  = "abort"  // its outcome is an error (maybe committed): Orders, Err

	// workers
	EvHandle  = "handle"          // a job handler started: Key, Owner, ClaimedAt, LeaseUntil
	EvFire    = "fire"            // a schedule fired: Key, Due, Owner, ClaimedAt, LeaseUntil, Cron
	EvElected = "elected"         // this process won a term: Term
	EvDeposed = "deposed"         // its term ended: Term
	EvQJob    = "qjob"            // a queue job's work started: Key (the order), N (the attempt), Owner, Err (the planned failure)
	EvFenced  = "fenced"          // a write fenced by the term: Term, N (rows), Err (none when the database refused it: N 0)
	EvLocal   = "refused-locally" // a fenced write the lapsed leader did not send (coord.ErrNotLeader): Term
	// A run of a job of the limited queue, or of a workflow task: its
	// work started (Key: the order or the task's key, N: the attempt,
	// Owner, LeaseUntil: the claim's lease end) and ended (Key, N, Err:
	// the planned failure, or the context's cause when it was cut short).
	EvLimStart  = "limited-start"
	EvLimEnd    = "limited-end"
	EvTaskStart = "task-start"
	EvTaskEnd   = "task-end"

	// Watermill subscribers (claimstore-soaksub)
	EvWMHandle = "wm-handle" // a message was handed to the handler: Key (the order), Owner (the process)

	// every child
	EvStart = "start" // the process is up: Pid
	EvStop  = "stop"  // it drained and stops: N (jobs or messages), Err
)

// Event is one line of a history.
type Event struct {
	// T is the host's wall clock when the line was written.
	T time.Time `json:"t"`
	// Proc is the process: slot and incarnation ("w1.2"), or "orch".
	Proc string `json:"proc"`
	Kind string `json:"kind"`

	Pid        int       `json:"pid,omitempty"`
	Key        string    `json:"key,omitempty"`
	Owner      string    `json:"owner,omitempty"`
	ClaimedAt  time.Time `json:"claimed_at,omitzero"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	Due        time.Time `json:"due,omitzero"`
	Cron       bool      `json:"cron,omitempty"`
	Orders     []string  `json:"orders,omitempty"`
	Term       int64     `json:"term,omitempty"`
	N          int64     `json:"n,omitempty"`
	M          int64     `json:"m,omitempty"`
	Seq        int       `json:"seq,omitempty"`
	Fault      string    `json:"fault,omitempty"`
	Target     string    `json:"target,omitempty"`
	Dur        float64   `json:"dur_s,omitempty"`
	Err        string    `json:"err,omitempty"`
	// Stats are a process's totals (stop): the worker's dispatch.Stats
	// or the relay's outbox.RelayStats, by field name.
	Stats map[string]int64 `json:"stats,omitempty"`
}

// History is one process's append-only history file. Each event is one
// write(2) of one line to a file opened with O_APPEND, so a line the
// process wrote survives its SIGKILL. It is safe for concurrent use.
type History struct {
	mu   sync.Mutex
	f    *os.File
	proc string
	err  error
}

// CreateHistory creates the history file path (it must not exist) for
// process proc.
func CreateHistory(path, proc string) (*History, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("soak: history: %w", err)
	}
	return &History{f: f, proc: proc}, nil
}

// Add stamps e with the time and the process and appends it. The first
// write error is kept and returned by Close.
func (h *History) Add(e Event) {
	e.T = time.Now()
	e.Proc = h.proc
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // an Event always encodes
	}
	b = append(b, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.f.Write(b); err != nil && h.err == nil {
		h.err = fmt.Errorf("soak: history %s: %w", h.f.Name(), err)
	}
}

// Close closes the file and returns the first error of Add or Close.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.f.Close(); err != nil && h.err == nil {
		h.err = err
	}
	return h.err
}

// ReadHistories reads every *.jsonl file of dir and returns their events
// ordered by time (stable: each file's own order is kept for equal
// times), and the number of lines that did not decode.
func ReadHistories(dir string) ([]Event, int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	sort.Strings(files)
	var all []Event
	bad := 0
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, 0, fmt.Errorf("soak: read history: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 4<<20)
		for sc.Scan() {
			var e Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				bad++
				continue
			}
			all = append(all, e)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("soak: read history %s: %w", name, err)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].T.Before(all[j].T) })
	return all, bad, nil
}
