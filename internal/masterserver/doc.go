// Package masterserver is the kvpool master's network front end: it serves
// the control-plane protocol (package masterproto) over TCP and the admin
// HTTP endpoints over an in-process master.Master, and runs the master's
// maintenance (Expire, Evict) on a ticker.
//
// # Connections
//
// A connection starts with HELLO: the protocol version must match and, when
// Options.Token is set, the token must match it (compared in constant time
// on SHA-256 digests, so neither the token nor its length leaks through
// timing). Then the client pipelines requests; one goroutine per connection
// decodes each, calls the master, and appends the response to a buffer that
// is written when no more requests are waiting (or 64 KiB have
// accumulated), so a pipelining client gets many responses per system
// call. Responses come in request order. A request that fails as a whole
// gets an ERROR frame with the request's id and the connection carries on;
// a lost stream (bad frame length, truncation) closes it.
//
// LOOKUP allocates nothing in steady state: the request is decoded into a
// per-connection Lookup, the master fills a per-connection LookupResult,
// node addresses come from a per-connection cache, and the response is
// encoded into the connection's buffer.
//
// # Node addresses
//
// Responses to LOOKUP, PLACE and QUERY carry each node's data-plane
// address, which the server learns from REGISTER (a node registered
// in-process is looked up in master.Nodes once).
//
// # Maintenance
//
// While Serve runs, a loop it owns calls Expire and then Evict every
// Options.MaintenanceInterval (default: heartbeat interval / 4), so a
// silent node's replicas leave the index within a quarter heartbeat of its
// TTL even when no Lookup runs.
//
// # Admin HTTP
//
// ServeAdmin serves Handler on its own mux (never http.DefaultServeMux):
// /metrics (the server's own Prometheus registry: master.NewCollector, the
// Go collector and kvpool_masterserver_* request counters), /health,
// /nodes (JSON) and /query_key?tenant=&key= (key as decimal or 0x-hex).
//
// # Running
//
// Run builds a master and a server from a Config, listens on both
// addresses, logs one startup line and serves until its context ends; it is
// what `kvpool master` calls.
package masterserver
