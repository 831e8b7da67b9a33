// Package config loads a kvpool node's configuration and says where every
// value came from.
//
// # Sources and precedence
//
// Load reads four layers; a later layer overrides an earlier one, key by
// key:
//
//  1. the defaults (Defaults; each constant says where its value comes
//     from);
//  2. the configuration file, YAML or JSON (chosen by the extension .yaml,
//     .yml or .json, otherwise by content: JSON when it starts with '{');
//  3. the environment: KVPOOL_<KEY> with the dots of the key as
//     underscores, upper case (KVPOOL_RAM_BYTES, KVPOOL_SSD_PATH);
//  4. the flags cmd/ saw set explicitly: --<key> with dots and underscores
//     as dashes (--ram-bytes, --ssd-path).
//
// The package never reads the process's environment or flags itself: cmd/
// passes a lookup function and the set flags in Sources. Fields lists
// every setting with its key, variable and flag, for cmd/ to register.
//
// # File layout
//
//	listen: 127.0.0.1:7480
//	admin_listen: 127.0.0.1:7481
//	node_name: node-1
//	master: 10.0.0.1:7470
//	cluster_id: prod-eu-1        # join only a master of this cluster
//	heartbeat_interval: 1s
//	block_size: 256KiB         # typical object size (sizes the policies), not a limit
//	max_object_bytes: 64MiB    # largest object, at most 512MiB
//	auth_token: "…"            # never printed
//	tenant_tokens_file: /etc/kvpool/tenant-tokens   # "tenant token" lines, mode 600
//	shared_namespaces: "public:alice,bob; docs"     # readable by every tenant
//	ram:
//	  bytes: 4GiB
//	  chunk_bytes: 4KiB        # objects occupy chains of chunks
//	  policy: s3fifo+second-hit
//	ssd:
//	  enabled: true
//	  path: /data/kv
//	  bytes: 64GiB
//	  sync: batch              # none | batch | always
//	  high_watermark: 0.95
//	  low_watermark: 0.90
//	  direct_io: false
//	promotion:
//	  threshold: 2
//	  ram_watermark: 0.9
//	  queue_cap: 256
//	  max_per_heartbeat: 64
//	pacers:                    # 0 or off = unlimited
//	  net_egress: 10Gbps
//	  net_ingress: 10Gbps
//	  ssd_read: 1.25GB/s
//	  ssd_write: 500MiB/s
//
// An unknown key is an error naming the key and file:line (with the
// closest known key as a suggestion), as are duplicate keys, YAML aliases,
// lists and empty values. Sizes and bandwidths take units (see Size and
// Bandwidth).
//
// # Mooncake names
//
// SSD offload is also accepted under Mooncake's names: the top-level file
// keys enable_ssd_offload (for ssd.enabled) and ssd_offload_path (for
// ssd.path), and the environment variables MOONCAKE_OFFLOAD_ENABLED and
// MOONCAKE_OFFLOAD_FILE_STORAGE_PATH. When a Mooncake name and kvpool's
// own name are both set in the same layer, kvpool's wins and Load adds a
// warning; across layers the usual precedence applies (a Mooncake variable
// overrides kvpool's key in the file).
//
// # Provenance and validation
//
// Loaded.Origins records, for every key, whether its value is the default
// or came from the file (with its line), an environment variable or a
// flag. Every error names the key, the value as written and where it came
// from:
//
//	ssd.path: "" (from env KVPOOL_SSD_PATH): required when SSD offload is on
//
// Loaded.StartupLine is the line a node prints at start, saying which
// tiers are really on. The auth token is a Secret: it never appears in
// formatted output, errors, warnings or the startup line.
//
// # Tenant tokens
//
// auth_token is the cluster token (nodes, operators, trusted clients: any
// tenant). tenant_tokens_file names a file of "tenant token" lines; Load
// reads it (ReadTenantTokens refuses a file its group or others may
// access, like ssh) into Node.TenantTokens, Secrets too. A connection with
// a tenant's token is bound to that tenant. shared_namespaces lists the
// namespaces every authenticated connection may read, each with the
// tenants that may write it (package auth).
//
// The SSD path is made absolute (relative to Sources.WorkDir) and refused
// when it has a ".." element; CheckSSDDir, which the node calls before
// opening the tier, also refuses a symbolic link.
//
// # The master
//
// LoadMaster builds the master's settings (Master) the same way, without a
// file: the defaults cmd/ passes, then KVPOOL_MASTER_<FLAG> with dashes as
// underscores (KVPOOL_MASTER_NODE_TTL), then the flags set. The token, the
// cluster ID, the tenant tokens file and the shared namespaces, when still empty, are
// taken from the node's variables (KVPOOL_AUTH_TOKEN and its siblings), so
// that one environment configures both processes.
package config
