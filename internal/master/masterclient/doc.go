// Package masterclient is the client stub of the kvpool master's control
// plane (package masterproto): nodes use it to Register and Heartbeat, the
// client library to Lookup prefixes, check Exists, Place new blocks and
// list Nodes. See Client for the connection pool, pipelining, reconnection
// after a master restart and the ErrUnavailable contract.
package masterclient
