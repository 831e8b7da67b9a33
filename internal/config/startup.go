package config

import (
	"fmt"
	"slices"
	"strings"
)

// StartupLine is the one line a node prints at start: the tiers really in
// effect — RAM bytes; the SSD path and bytes, or "SSD offload: off" — with
// where each value came from, the largest object the node takes (max_object_bytes,
// or what the RAM tier keeps when less: config.Node.RAMKeeps), the pacers that are on, and the
// addresses. For example:
//
//	kvpool node: RAM 1.0 GiB (default), objects up to 64.0 MiB (default); SSD /data/kv 64.0 GiB (file node.yaml, env MOONCAKE_OFFLOAD_FILE_STORAGE_PATH), sync batch; listen 127.0.0.1:7480
//
// With tenant tokens or shared namespaces it says how many tokens and which
// namespaces. It never contains a token.
func (l *Loaded) StartupLine() string {
	n := l.Node
	var b strings.Builder
	fmt.Fprintf(&b, "kvpool node: RAM %v (%s)", n.RAM.Bytes, l.origins("ram.bytes"))
	if eff := n.EffectiveMaxObject(); eff < n.MaxObjectBytes {
		// Every object passes through RAM: say so, or a put the node
		// refuses would look like a bug in max_object_bytes.
		why := "what RAM keeps under ram.low_watermark, without SSD"
		if n.SSD.Enabled {
			why = "the RAM size"
		}
		fmt.Fprintf(&b, ", objects up to %v (%s; max_object_bytes %v, %s)", eff, why, n.MaxObjectBytes, l.origins("max_object_bytes"))
	} else {
		fmt.Fprintf(&b, ", objects up to %v (%s)", eff, l.origins("max_object_bytes"))
	}
	if n.SSD.Enabled {
		fmt.Fprintf(&b, "; SSD %s %v (%s), sync %s", n.SSD.Path, n.SSD.Bytes, l.origins("ssd.enabled", "ssd.path", "ssd.bytes"), n.SSD.Sync)
		if n.SSD.DirectIO {
			b.WriteString(", direct I/O")
		}
	} else {
		fmt.Fprintf(&b, "; SSD offload: off (%s)", l.origins("ssd.enabled"))
	}
	var paced []string
	for _, p := range []struct {
		key, name string
		v         Bandwidth
	}{
		{"pacers.net_egress", "net egress", n.Pacers.NetEgress},
		{"pacers.net_ingress", "net ingress", n.Pacers.NetIngress},
		{"pacers.ssd_read", "SSD read", n.Pacers.SSDRead},
		{"pacers.ssd_write", "SSD write", n.Pacers.SSDWrite},
	} {
		if p.v != 0 {
			paced = append(paced, fmt.Sprintf("%s %v (%s)", p.name, p.v, l.origins(p.key)))
		}
	}
	if len(paced) > 0 {
		b.WriteString("; paced: ")
		b.WriteString(strings.Join(paced, ", "))
	}
	if len(n.TenantTokens) > 0 {
		fmt.Fprintf(&b, "; %d tenant tokens (%s)", len(n.TenantTokens), l.origins("tenant_tokens_file"))
	}
	if len(n.SharedNamespaces) > 0 {
		fmt.Fprintf(&b, "; shared namespaces %s (%s)", FormatSharedNamespaces(n.SharedNamespaces), l.origins("shared_namespaces"))
	}
	fmt.Fprintf(&b, "; listen %s", n.Listen)
	if n.RESPListen != "" {
		fmt.Fprintf(&b, "; Redis front %s (%s), %d copies per SET", n.RESPListen, l.origins("resp_listen"), n.RESPReplicas)
	}
	if n.Etcd != "" {
		fmt.Fprintf(&b, "; leader from etcd %s", n.Etcd)
	}
	if n.Master != "" {
		fmt.Fprintf(&b, "; master %s", n.Master)
		if n.ClusterID != "" {
			fmt.Fprintf(&b, " (cluster %s)", n.ClusterID)
		}
	}
	return b.String()
}

// origins lists the distinct short origins of keys, in order.
func (l *Loaded) origins(keys ...string) string {
	var out []string
	for _, k := range keys {
		o, ok := l.Origins[k]
		s := "default"
		if ok {
			s = o.Short()
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}
