package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/tier/ssd"
)

// Field describes one setting for cmd/, which registers a flag per field
// and passes the ones the user set to Load (Sources.Flags, keyed by Flag).
type Field struct {
	// Key is the setting's name in the file, dotted by section
	// ("ssd.path"), and in errors.
	Key string
	// Env is its environment variable ("KVPOOL_SSD_PATH").
	Env string
	// Flag is its command-line flag name without dashes ("ssd-path").
	Flag string
	// Usage is a one-line description for flag help.
	Usage string
	// Default is the default value as text ("" for an empty default).
	Default string
	// Secret marks the auth token: cmd must not echo it.
	Secret bool
	// Bool marks an on/off setting, for a flag that may be given without
	// a value (--ssd-enabled).
	Bool bool
}

// Fields returns every setting in a stable order.
func Fields() []Field {
	d := Defaults()
	fs := fields()
	out := make([]Field, len(fs))
	for i, f := range fs {
		out[i] = Field{Key: f.key, Env: envName(f.key), Flag: flagName(f.key), Usage: f.usage, Default: f.show(&d), Secret: f.secret, Bool: f.bool}
	}
	return out
}

// envName is the kvpool environment variable of a key:
// "ssd.path" → KVPOOL_SSD_PATH.
func envName(key string) string {
	return "KVPOOL_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// flagName is the flag of a key: "ssd.high_watermark" → ssd-high-watermark.
func flagName(key string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(key)
}

// field is one setting: how to parse text into the Node and show it back.
type field struct {
	key    string
	usage  string
	secret bool
	bool   bool
	set    func(n *Node, v string) error
	show   func(n *Node) string
}

// alias is a Mooncake name for a setting.
type alias struct {
	name   string // file key or environment variable
	target string // kvpool key
}

// fileAliases are Mooncake's config-file keys (docs/design.md, "Mooncake
// compatibility"); they sit at the top level of the file.
func fileAliases() []alias {
	return []alias{
		{"enable_ssd_offload", "ssd.enabled"},
		{"ssd_offload_path", "ssd.path"},
	}
}

// envAliases are Mooncake's environment variables.
func envAliases() []alias {
	return []alias{
		{"MOONCAKE_OFFLOAD_ENABLED", "ssd.enabled"},
		{"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", "ssd.path"},
	}
}

// sections are the file's second-level mappings.
func sections() []string { return []string{"ram", "ssd", "promotion", "pacers", "quota"} }

// fields returns the settings table, fresh on every call.
func fields() []field {
	return []field{
		strField("listen", "data-plane TCP address (host:port)", func(n *Node) *string { return &n.Listen }),
		strField("admin_listen", "HTTP address of /metrics and /health", func(n *Node) *string { return &n.AdminListen }),
		strField("resp_listen", "Redis (RESP2) address serving the whole pool to Redis clients, e.g. 127.0.0.1:7482 (empty: off; needs master)", func(n *Node) *string { return &n.RESPListen }),
		intField("resp_replicas", "copies a SET through the Redis front stores (1 to 8)", func(n *Node) *int { return &n.RESPReplicas }),
		strField("node_name", "node name for the master and metrics (default: from the listen address)", func(n *Node) *string { return &n.NodeName }),
		strField("master", "master address host:port, or the masters of a cluster comma-separated (the node follows their leader; empty: standalone)", func(n *Node) *string { return &n.Master }),
		strField("etcd", "etcd client URLs, comma-separated, to find the cluster's leading master through (needs cluster_id, its election's name)", func(n *Node) *string { return &n.Etcd }),
		strField("cluster_id", "cluster ID: join only a master of this cluster (empty: a master without one)", func(n *Node) *string { return &n.ClusterID }),
		durationField("heartbeat_interval", "interval between heartbeats to the master", func(n *Node) *time.Duration { return &n.HeartbeatInterval }),
		sizeField("block_size", "typical object size the tiers' eviction policies are sized for (e.g. 256KiB); not a limit on object size", func(n *Node) *Size { return &n.BlockSize }),
		sizeField("max_object_bytes", "largest object the node stores (e.g. 64MiB, at most 512MiB; less if its RAM keeps less under ram.low_watermark)", func(n *Node) *Size { return &n.MaxObjectBytes }),
		{
			key: "auth_token", usage: "shared secret clients must present (prefer the file or KVPOOL_AUTH_TOKEN: flags are visible in the process list)", secret: true,
			set:  func(n *Node, v string) error { n.AuthToken = Secret(v); return nil },
			show: func(n *Node) string { return n.AuthToken.String() },
		},
		strField("tenant_tokens_file", "file of \"tenant token\" lines (mode 600): a connection with a tenant's token is bound to that tenant", func(n *Node) *string { return &n.TenantTokensFile }),
		{
			key: "shared_namespaces", usage: "namespaces every tenant may read, ';'-separated, each with optional writers: public:alice,bob; docs",
			set: func(n *Node, v string) error {
				ns, err := ParseSharedNamespaces(v)
				if err != nil {
					return err
				}
				n.SharedNamespaces = ns
				return nil
			},
			show: func(n *Node) string { return FormatSharedNamespaces(n.SharedNamespaces) },
		},
		sizeField("ram.bytes", "RAM tier budget (e.g. 512MiB, 4GiB, 1.5GB)", func(n *Node) *Size { return &n.RAM.Bytes }),
		sizeField("ram.chunk_bytes", "RAM tier chunk: objects occupy chains of chunks (a power of two, 64B to 1MiB)", func(n *Node) *Size { return &n.RAM.ChunkBytes }),
		strField("ram.policy", "RAM eviction policy, eviction[+admission] (lru, s3fifo+second-hit, …)", func(n *Node) *string { return &n.RAM.Policy }),
		floatField("ram.high_watermark", "RAM eviction (demotion) starts above this used share of its bytes", func(n *Node) *float64 { return &n.RAM.HighWatermark }),
		floatField("ram.low_watermark", "RAM eviction stops at this used share of its bytes", func(n *Node) *float64 { return &n.RAM.LowWatermark }),
		boolField("ssd.enabled", "turn SSD offload on", func(n *Node) *bool { return &n.SSD.Enabled }),
		strField("ssd.path", "SSD tier directory", func(n *Node) *string { return &n.SSD.Path }),
		sizeField("ssd.bytes", "SSD tier capacity (e.g. 64GiB)", func(n *Node) *Size { return &n.SSD.Bytes }),
		{
			key: "ssd.sync", usage: "SSD durability: none, batch or always",
			set: func(n *Node, v string) error {
				m, err := ssd.ParseSyncMode(v)
				if err != nil || m == "" {
					return fmt.Errorf("want none, batch or always")
				}
				n.SSD.Sync = m
				return nil
			},
			show: func(n *Node) string { return string(n.SSD.Sync) },
		},
		floatField("ssd.high_watermark", "SSD eviction starts above this used share of its pages", func(n *Node) *float64 { return &n.SSD.HighWatermark }),
		floatField("ssd.low_watermark", "SSD eviction stops at this used share of its pages", func(n *Node) *float64 { return &n.SSD.LowWatermark }),
		boolField("ssd.direct_io", "open SSD page files with O_DIRECT", func(n *Node) *bool { return &n.SSD.DirectIO }),
		intField("promotion.threshold", "touches that make an SSD block a promotion candidate", func(n *Node) *int { return &n.Promotion.Threshold }),
		floatField("promotion.ram_watermark", "no promotion while the RAM tier is fuller than this share", func(n *Node) *float64 { return &n.Promotion.RAMWatermark }),
		intField("promotion.queue_cap", "most pending promotions", func(n *Node) *int { return &n.Promotion.QueueCap }),
		intField("promotion.max_per_heartbeat", "most promotions per heartbeat (0: promotion off)", func(n *Node) *int { return &n.Promotion.MaxPerHeartbeat }),
		sizeField("quota.default_bytes", "per-tenant quota of resident bytes, RAM+SSD (0: unlimited; per-tenant overrides: file key quota.tenants)", func(n *Node) *Size { return &n.Quota.DefaultBytes }),
		bandwidthField("pacers.net_egress", "network send limit (e.g. 10Gbps, 1.25GB/s; 0: off)", func(n *Node) *Bandwidth { return &n.Pacers.NetEgress }),
		bandwidthField("pacers.net_ingress", "network receive limit (0: off)", func(n *Node) *Bandwidth { return &n.Pacers.NetIngress }),
		bandwidthField("pacers.ssd_read", "SSD read limit (e.g. 500MiB/s; 0: off)", func(n *Node) *Bandwidth { return &n.Pacers.SSDRead }),
		bandwidthField("pacers.ssd_write", "SSD write limit (0: off)", func(n *Node) *Bandwidth { return &n.Pacers.SSDWrite }),
	}
}

func findField(fs []field, key string) (field, bool) {
	for _, f := range fs {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}

func strField(key, usage string, p func(*Node) *string) field {
	return field{key: key, usage: usage,
		set:  func(n *Node, v string) error { *p(n) = v; return nil },
		show: func(n *Node) string { return *p(n) },
	}
}

func sizeField(key, usage string, p func(*Node) *Size) field {
	return field{key: key, usage: usage,
		set: func(n *Node, v string) error {
			s, err := ParseSize(v)
			if err != nil {
				return err
			}
			*p(n) = s
			return nil
		},
		show: func(n *Node) string { return p(n).String() },
	}
}

func bandwidthField(key, usage string, p func(*Node) *Bandwidth) field {
	return field{key: key, usage: usage,
		set: func(n *Node, v string) error {
			b, err := ParseBandwidth(v)
			if err != nil {
				return err
			}
			*p(n) = b
			return nil
		},
		show: func(n *Node) string { return p(n).String() },
	}
}

func boolField(key, usage string, p func(*Node) *bool) field {
	return field{key: key, usage: usage, bool: true,
		set: func(n *Node, v string) error {
			b, err := parseBool(v)
			if err != nil {
				return err
			}
			*p(n) = b
			return nil
		},
		show: func(n *Node) string { return strconv.FormatBool(*p(n)) },
	}
}

func intField(key, usage string, p func(*Node) *int) field {
	return field{key: key, usage: usage,
		set: func(n *Node, v string) error {
			i, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("want a whole number")
			}
			*p(n) = i
			return nil
		},
		show: func(n *Node) string { return strconv.Itoa(*p(n)) },
	}
}

func floatField(key, usage string, p func(*Node) *float64) field {
	return field{key: key, usage: usage,
		set: func(n *Node, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return fmt.Errorf("want a number such as 0.9")
			}
			*p(n) = f
			return nil
		},
		show: func(n *Node) string { return strconv.FormatFloat(*p(n), 'g', -1, 64) },
	}
}

func durationField(key, usage string, p func(*Node) *time.Duration) field {
	return field{key: key, usage: usage,
		set: func(n *Node, v string) error {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("want a duration such as 1s or 500ms")
			}
			*p(n) = d
			return nil
		},
		show: func(n *Node) string { return p(n).String() },
	}
}

// parseBool accepts true/false, 1/0, yes/no and on/off, in any case.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("want true or false (or 1/0, yes/no, on/off)")
}
