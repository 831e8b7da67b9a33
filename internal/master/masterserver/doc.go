// Package masterserver is the kvpool master's network front end: it serves
// the control-plane protocol (package masterproto) over TCP and the admin
// HTTP endpoints over an in-process master.Master, and runs the master's
// maintenance (Expire, Evict) on a ticker. The accept loop, the connection
// limit and the graceful stop are package server's (the skeleton every
// kvpool front shares); this package is the master protocol's connection
// handler.
//
// # Connections
//
// A connection starts with HELLO: the protocol version must match and, when
// Options.Token is set, the token must be the cluster token or a tenant's
// token from Options.TenantTokens (package auth; digests, so neither the
// token nor its length leaks through timing). The token, not the request,
// decides the tenant: every LOOKUP, LOCATE, EXISTS, QUERY, KEYINFO, SCAN and
// COUNT must name a tenant the connection may read, every PLACE and EXPIRE
// one it may write (its own tenant, or a shared namespace per
// Options.Shared that lists it as a writer; the cluster token may use
// any), and
// REGISTER and HEARTBEAT need the cluster token. A refused request gets an
// ERROR frame with CodeUnauthorized, is counted in
// kvpool_masterserver_requests_forbidden_total, and the connection carries
// on. Then the client pipelines requests; one goroutine per connection
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
// Responses to LOOKUP, LOCATE, PLACE and QUERY carry each node's data-plane
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
// /metrics (the server's own Prometheus registry: NewCollector, the
// Go collector and kvpool_masterserver_* request counters), /health,
// /nodes (JSON) and /query_key?tenant=&key= (key as decimal or 0x-hex).
// On a listener beyond loopback every admin request must carry the cluster
// token as "Authorization: Bearer <token>", and without a cluster token
// such a listener is refused (auth.AdminHandler).
//
// # Running
//
// Run builds a master and a server from a Config, listens on both
// addresses, logs one startup line and serves until its context ends; it is
// what `kvpool master` calls.
package masterserver
