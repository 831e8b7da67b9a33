// Package respserver is kvpool's Redis front: a RESP2 server on a node
// that serves the whole pool to Redis clients nobody here wrote (redis-py
// and LMCache's redis:// connector, LMCache's native RESP connector,
// redis-cli, redis-benchmark, SGLang HiCache backends).
//
// The package knows the protocol and Redis's command semantics; the pool
// behind it is a Backend (package node provides the real one: the node's
// store, its peers over the node protocol and the master's index). Every
// connection is bound to one tenant. An open node (no tokens configured)
// serves every connection as the default tenant without AUTH, wherever it
// comes from, and answers AUTH as Redis does without a password (AUTH
// default <anything> is OK); a node with tokens requires AUTH (or HELLO
// AUTH) within HandshakeTimeout of connecting, and the connection acts
// for the tenant its token and user name name. Keys
// are kvpool named objects of that tenant (block.Named), so a value SET
// here is the object `kvpool ctl get --key` reads, and the other way
// round.
//
// Replies are byte-identical to Redis 7's for the same input, errors
// included ("-ERR wrong number of arguments for 'get' command"), except
// where kvpool says more: INFO carries kvpool's own figures and a kvpool
// section, COMMAND DOCS documents the commands served here only, and
// KVPOOL.PREFIX is kvpool's own command (the number of leading keys
// present: what a prefix cache asks before it fetches).
//
// What is not Redis: one database (SELECT 0 only); values are strings (no
// lists, hashes, ...: those commands are unknown); SET's NX, XX and GET
// are atomic against other commands of this node's front, not against
// another node's front writing the same key at the same moment; a value
// whose key expired stops being visible at its deadline and its bytes are
// reclaimed by eviction, not at once.
package respserver
