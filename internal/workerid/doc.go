// Package workerid builds the default worker id that every package of the
// library gives a worker, relay, reader, job client or election candidate
// which was given none: host name, process id and a random suffix, so that
// two processes, or two workers of one process, never share one.
package workerid
