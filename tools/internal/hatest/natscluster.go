//go:build linux

package hatest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultNATSServer is the nats-server binary [StartNATSCluster] runs
// unless told otherwise (the Debian package's path).
const DefaultNATSServer = "/usr/sbin/nats-server"

// NATSClusterOptions says where the nodes of a cluster listen. Zero fields
// take their defaults.
type NATSClusterOptions struct {
	// Binary is the nats-server executable; default [DefaultNATSServer].
	Binary string
	// Dir holds each node's configuration, JetStream storage and log in
	// a sub-directory named after the node; required.
	Dir string
	// Host is the loopback address every port binds; default 127.0.0.1.
	Host string
	// ClientPort, ClusterPort and MonitorPort are the first node's
	// ports; node i (0-based) listens on port + i. Defaults 14222 (client
	// connections), 16222 (routes between the nodes) and 18222 (HTTP
	// monitoring, /jsz).
	ClientPort, ClusterPort, MonitorPort int
	// Name is the cluster's name; default "claimstore-ha".
	Name string
}

// NATSNode is one nats-server process of a cluster.
type NATSNode struct {
	// Name is the node's server name (n1, n2, n3), the name JetStream
	// reports as a stream's leader or replica.
	Name string
	// ClientURL is the node's client URL (nats://host:port).
	ClientURL string
	// MonitorURL is the node's HTTP monitoring base URL.
	MonitorURL string
	conf, log  string
	cmd        *exec.Cmd
	done       chan struct{}
}

// NATSCluster is a three-node nats-server cluster with JetStream, each node
// a child process. Its methods are safe for concurrent use.
type NATSCluster struct {
	// Nodes are the cluster's nodes, n1 to n3.
	Nodes  []*NATSNode
	binary string
	mu     sync.Mutex
}

// StartNATSCluster writes the configuration of three JetStream nodes
// clustered by routes under o.Dir and starts them. It returns once every
// node accepts client connections, or an error: a missing o.Dir, a port
// that is taken, a binary that cannot run, or a node that did not come up
// within 30 s (its log is named). JetStream itself elects its meta leader
// a few seconds later; creating a stream may fail until then. Close stops
// the nodes.
func StartNATSCluster(o NATSClusterOptions) (*NATSCluster, error) {
	if o.Dir == "" {
		return nil, errors.New("hatest: nats cluster: no directory")
	}
	if o.Binary == "" {
		o.Binary = DefaultNATSServer
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.ClientPort == 0 {
		o.ClientPort = 14222
	}
	if o.ClusterPort == 0 {
		o.ClusterPort = 16222
	}
	if o.MonitorPort == 0 {
		o.MonitorPort = 18222
	}
	if o.Name == "" {
		o.Name = "claimstore-ha"
	}
	const n = 3
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats-route://%s:%d", o.Host, o.ClusterPort+i)
	}
	c := &NATSCluster{binary: o.Binary}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(o.Dir, name)
		if err := os.MkdirAll(filepath.Join(dir, "jetstream"), 0o755); err != nil {
			return nil, fmt.Errorf("hatest: nats cluster: %w", err)
		}
		for _, p := range []int{o.ClientPort + i, o.ClusterPort + i, o.MonitorPort + i} {
			if err := portFree(o.Host, p); err != nil {
				return nil, fmt.Errorf("hatest: nats cluster: %w (another cluster still running? scripts/nats-cluster.sh stop)", err)
			}
		}
		node := &NATSNode{
			Name:       name,
			ClientURL:  fmt.Sprintf("nats://%s:%d", o.Host, o.ClientPort+i),
			MonitorURL: fmt.Sprintf("http://%s:%d", o.Host, o.MonitorPort+i),
			conf:       filepath.Join(dir, "nats.conf"),
			log:        filepath.Join(dir, "nats.log"),
		}
		conf := fmt.Sprintf(`server_name: %s
listen: "%s:%d"
http: "%s:%d"
jetstream {
  store_dir: %q
}
cluster {
  name: %s
  listen: "%s:%d"
  routes: [%s]
}
`, name, o.Host, o.ClientPort+i, o.Host, o.MonitorPort+i, filepath.Join(dir, "jetstream"),
			o.Name, o.Host, o.ClusterPort+i, strings.Join(routes, ", "))
		if err := os.WriteFile(node.conf, []byte(conf), 0o644); err != nil {
			return nil, fmt.Errorf("hatest: nats cluster: %w", err)
		}
		c.Nodes = append(c.Nodes, node)
	}
	for i := range c.Nodes {
		if err := c.Start(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i := range c.Nodes {
		if err := c.WaitListening(i, 30*time.Second); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// portFree fails when something already listens on host:port; the error
// names the address.
func portFree(host string, port int) error {
	addr := net.JoinHostPort(host, fmt.Sprint(port))
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err == nil {
		conn.Close()
		return fmt.Errorf("%s is in use", addr)
	}
	return nil
}

// URLs returns the client URLs of every node, comma-separated, as
// nats.Connect takes them.
func (c *NATSCluster) URLs() string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.ClientURL
	}
	return strings.Join(urls, ",")
}

// Index returns the index of the node named name, or -1.
func (c *NATSCluster) Index(name string) int {
	for i, n := range c.Nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// Start starts node i with its configuration and storage (a restart keeps
// the storage). The process gets SIGKILL when the calling process dies.
// Errors: the node is already running, or the binary cannot start.
func (c *NATSCluster) Start(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.Nodes[i]
	if n.cmd != nil {
		return fmt.Errorf("hatest: nats node %s is running", n.Name)
	}
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("hatest: nats node %s: %w", n.Name, err)
	}
	cmd := exec.Command(c.binary, "-c", n.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("hatest: start nats node %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	n.cmd, n.done = cmd, done
	return nil
}

// WaitListening waits up to timeout for node i to accept client
// connections; the error names the node's log.
func (c *NATSCluster) WaitListening(i int, timeout time.Duration) error {
	n := c.Nodes[i]
	addr := strings.TrimPrefix(n.ClientURL, "nats://")
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hatest: nats node %s not listening on %s after %v (log: %s)", n.Name, addr, timeout, n.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill sends SIGKILL to node i and waits for it to exit; a node that is
// not running is left alone.
func (c *NATSCluster) Kill(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.Nodes[i]
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies too
	_ = n.cmd.Process.Kill()
	<-n.done
	n.cmd, n.done = nil, nil
}

// Stop freezes node i with SIGSTOP: its sockets stay open but it answers
// nothing, as a node cut off by a network partition. Resume ends it.
func (c *NATSCluster) Stop(i int) error { return c.signal(i, syscall.SIGSTOP) }

// Resume lets node i run again after [NATSCluster.Stop] (SIGCONT).
func (c *NATSCluster) Resume(i int) error { return c.signal(i, syscall.SIGCONT) }

func (c *NATSCluster) signal(i int, sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.Nodes[i]
	if n.cmd == nil {
		return fmt.Errorf("hatest: nats node %s is not running", n.Name)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("hatest: signal %v to nats node %s: %w", sig, n.Name, err)
	}
	return nil
}

// Close kills every node.
func (c *NATSCluster) Close() {
	for i := range c.Nodes {
		c.Kill(i)
	}
}

// StreamReplica is one node's view of a stream, from its /jsz endpoint.
type StreamReplica struct {
	// Messages is the number of messages the node stores; LastSeq the
	// last sequence it stores.
	Messages, LastSeq uint64
	// Leader is the stream leader the node knows of ("" for none).
	Leader string
}

// jsz is the part of the /jsz?accounts=true&streams=true answer that
// StreamState reads.
type jsz struct {
	AccountDetails []struct {
		Streams []struct {
			Name  string `json:"name"`
			State struct {
				Msgs    uint64 `json:"messages"`
				LastSeq uint64 `json:"last_seq"`
			} `json:"state"`
			Cluster *struct {
				Leader string `json:"leader"`
			} `json:"cluster"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// StreamState asks node i's monitoring endpoint (/jsz) for its replica of
// stream, within timeout (a stopped node answers nothing). Errors: the
// request failed or timed out, the answer did not decode, or the node holds
// no replica of stream.
func (c *NATSCluster) StreamState(ctx context.Context, i int, stream string, timeout time.Duration) (StreamReplica, error) {
	n := c.Nodes[i]
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.MonitorURL+"/jsz?accounts=true&streams=true", nil)
	if err != nil {
		return StreamReplica{}, fmt.Errorf("hatest: jsz of %s: %w", n.Name, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return StreamReplica{}, fmt.Errorf("hatest: jsz of %s: %w", n.Name, err)
	}
	defer resp.Body.Close()
	var z jsz
	if err := json.NewDecoder(resp.Body).Decode(&z); err != nil {
		return StreamReplica{}, fmt.Errorf("hatest: jsz of %s: %w", n.Name, err)
	}
	for _, a := range z.AccountDetails {
		for _, s := range a.Streams {
			if s.Name != stream {
				continue
			}
			r := StreamReplica{Messages: s.State.Msgs, LastSeq: s.State.LastSeq}
			if s.Cluster != nil {
				r.Leader = s.Cluster.Leader
			}
			return r, nil
		}
	}
	return StreamReplica{}, fmt.Errorf("hatest: jsz of %s: no replica of stream %s", n.Name, stream)
}
