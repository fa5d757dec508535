// Package natsembed runs a NATS server with JetStream inside the current
// process (github.com/nats-io/nats-server/v2), so that the outbox demo and
// tests need no broker installed. It is a thin wrapper that picks safe
// local defaults: loopback only, a random port, file storage in a given
// directory.
package natsembed

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options configures an embedded server.
type Options struct {
	// StoreDir is the JetStream storage directory; required. A server
	// started again on the same directory finds its streams and messages.
	StoreDir string
	// Host is the listen address; default 127.0.0.1.
	Host string
	// Port is the client port; 0 picks a free one.
	Port int
	// ReadyTimeout bounds the wait for the server to accept clients;
	// default 10 s.
	ReadyTimeout time.Duration
}

// Server is a running embedded NATS server with JetStream.
type Server struct {
	srv  *server.Server
	port int
}

// Start starts a server and waits until it accepts clients. It fails when
// StoreDir is empty, the port is taken, or the server is not ready within
// ReadyTimeout.
func Start(o Options) (*Server, error) {
	if o.StoreDir == "" {
		return nil, errors.New("natsembed: empty store dir")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	port := o.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "claimstore-embedded",
		Host:       o.Host,
		Port:       port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		NoLog:      true,
		NoSigs:     true,
		// No HTTP monitoring, no cluster: a single local server.
		HTTPPort: 0,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsembed: new server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(o.ReadyTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("natsembed: server on %s:%d not ready within %v", o.Host, o.Port, o.ReadyTimeout)
	}
	addr, ok := srv.Addr().(*net.TCPAddr)
	if !ok {
		srv.Shutdown()
		return nil, fmt.Errorf("natsembed: unexpected listen address %v", srv.Addr())
	}
	return &Server{srv: srv, port: addr.Port}, nil
}

// Port returns the client port the server listens on.
func (s *Server) Port() int { return s.port }

// URL returns the client URL, nats://host:port.
func (s *Server) URL() string { return s.srv.ClientURL() }

// Server returns the underlying nats-server instance.
func (s *Server) Server() *server.Server { return s.srv }

// Shutdown stops the server and waits until it has stopped; the store
// directory keeps its data.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}
