// Package server is the skeleton every kvpool protocol front shares: the
// node server (internal/node/nodeserver), the master server
// (internal/master/masterserver) and any later front plug a per-connection
// Handler into it.
//
// The skeleton owns what does not depend on the protocol: the accept loop
// with its backoff on temporary errors (EMFILE and friends), the connection
// limit and the polite refusal of connections over it (the Handler says
// how its protocol refuses), the handshake deadline, the authentication
// table built from the auth options, the counters, and a graceful close:
// stopping interrupts connections waiting for a request, lets the request
// in flight finish, cancels the context of the requests, and waits for
// every goroutine it started. It knows nothing of frames or hellos: a
// protocol that starts with a 16-byte hello (kvpool's) and one that starts
// with a command (Redis) plug in the same way.
package server
