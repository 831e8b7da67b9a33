// Package netns gives kvpool's testbed real hosts on one Linux machine:
// each host is a network namespace with an address of its own on a
// private bridge, reached through a veth pair whose two ends the kernel
// shapes (an htb qdisc on each: the link's rate, shared fairly between
// the peers whose packets cross it, as a switch port that queues fairly
// between hosts), so that bytes between two hosts cross two real links,
// queue where a real link would, and meet TCP's congestion control —
// where the node's pacers only count bytes on one loopback.
//
// A Net numbered N uses the subnet 10.213.N.0/24 and these names:
//
//	root namespace  kvpNgw 10.213.N.1      the operator's way in (unshaped)
//	kvpN-switch     br0, with ports gw, h0, h1, …
//	kvpN-<host k>   eth0 10.213.N.(10+k), the peer of hk
//
// Host k's egress is shaped on its eth0, its ingress on hk (the bridge's
// egress toward it); a host's own loopback is not shaped, so traffic
// between two processes of one host stays local. A host that is Down has
// its bridge port down: packets to and from it are dropped, as in a
// partition, while its processes and sockets live on.
//
// Creating namespaces needs root, Linux and iproute2's ip and tc
// (Available says which is missing). Every Net records its owner, this
// process, in /run/kvpool-netns/N.json; New removes the namespaces of a
// Net whose owner is gone (a crash, kill -9) before it takes a number,
// and CleanStale does it on demand.
package netns
