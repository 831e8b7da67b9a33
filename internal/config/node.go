package config

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/internal/tier/ram"
	"github.com/kvpool/kvpool/internal/tier/ssd"
	"github.com/kvpool/kvpool/internal/vfs"
)

// Defaults. Each says where its value comes from.
const (
	// DefaultListen is the data-plane address: loopback, so that a node
	// started without configuration is not reachable from the network;
	// 7480 is kvpool's port (the master takes 7470).
	DefaultListen = "127.0.0.1:7480"
	// DefaultRESPReplicas is the number of copies a SET through the Redis
	// front stores: 1, as the client library's default (Mooncake's
	// replica_num).
	DefaultRESPReplicas = 1
	// DefaultAdminListen serves /metrics and /health next to the data
	// plane, also on loopback.
	DefaultAdminListen = "127.0.0.1:7481"
	// DefaultBlockSize is the typical object size the tiers' eviction and
	// admission policies are sized for (policy capacity = tier bytes /
	// block_size objects): the top of the live-run payload range
	// (64–256 KiB; docs/design.md, "Scale model"). It limits no object's
	// size (max_object_bytes does).
	DefaultBlockSize Size = ssd.DefaultBlockSize
	// DefaultMaxObjectBytes is the largest object a node stores by
	// default: 64 MiB (store.DefaultMaxObjectSize; an LMCache chunk of an
	// 8B model is about 32 MiB).
	DefaultMaxObjectBytes Size = 64 << 20
	// MaxObjectBytesLimit is the most max_object_bytes may be: 512 MiB
	// (store.MaxObjectSizeLimit, what the node protocol's frames are sized
	// for).
	MaxObjectBytesLimit Size = 512 << 20
	// DefaultRAMChunkBytes is the RAM tier's chunk: 4 KiB, one page, so a
	// 28-byte object takes one chunk and a 32 KiB one wastes nothing.
	DefaultRAMChunkBytes Size = 4 << 10
	// DefaultRAMBytes gives a node 1 GiB of RAM tier: 4096 blocks of
	// 256 KiB, enough for a laptop run of the traces.
	DefaultRAMBytes Size = 1 << 30
	// DefaultRAMPolicy is LRU, the baseline every other policy is
	// compared with (and Mooncake's own default).
	DefaultRAMPolicy = "lru"
	// DefaultSSDBytes is the SSD tier's default capacity
	// (ssd.DefaultCapacityBytes).
	DefaultSSDBytes Size = ssd.DefaultCapacityBytes
	// DefaultSSDSync is group commit (ssd.DefaultSync): a restarted node
	// finds its blocks for one fsync per batch rather than per block.
	DefaultSSDSync = ssd.DefaultSync
	// DefaultSSDHighWatermark and DefaultSSDLowWatermark are the SSD
	// tier's eviction watermarks (Mooncake master's defaults, see
	// ssd.DefaultHighWatermark).
	DefaultSSDHighWatermark = ssd.DefaultHighWatermark
	// DefaultRAMHighWatermark and DefaultRAMLowWatermark: Mooncake's
	// defaults (evict 5% past 95%); the promotion watermark equals the high
	// one, so promotions fill RAM up to it and eviction makes room again.
	DefaultRAMHighWatermark = 0.95
	DefaultRAMLowWatermark  = 0.90
	DefaultSSDLowWatermark  = ssd.DefaultLowWatermark
	// DefaultPromotionThreshold promotes an SSD block to RAM on its second
	// touch (docs/design.md, "Eviction, demotion, promotion").
	DefaultPromotionThreshold = 2
	// DefaultPromotionRAMWatermark stops promotions while the RAM tier is
	// over 90% full, so that promotion never forces RAM evictions of its
	// own.
	DefaultPromotionRAMWatermark = 0.95
	// DefaultPromotionQueueCap bounds pending promotions: 256 blocks of
	// 256 KiB is 64 MiB, 6% of the default RAM tier, so a burst of SSD
	// hits cannot queue more than the RAM watermark leaves room for.
	DefaultPromotionQueueCap = 256
	// DefaultMaxPerHeartbeat caps promotions per node per heartbeat (the
	// Mooncake knob of the same name): at the default 1 s heartbeat, 64 ×
	// 256 KiB is 16 MiB/s of SSD→RAM copies, under 1% of an NVMe SSD's
	// ~3 GB/s reads, so promotion never competes with foreground reads.
	DefaultMaxPerHeartbeat = 64
	// DefaultHeartbeatInterval is how often a node reports to the master:
	// with a TTL of a few intervals, a silent node leaves the index within
	// seconds, and one small message a second costs nothing.
	DefaultHeartbeatInterval = time.Second
)

// Limits checked by Validate, with their reasons.
const (
	// maxBlockSize bounds block_size, a typical object size, within the
	// tiers' 32-bit payload lengths (the tiers' own bound).
	maxBlockSize Size = 1 << 30
	// maxObjectBytes is the most max_object_bytes may be: 512 MiB
	// (store.MaxObjectSizeLimit, what the node protocol's frames are
	// sized for).
	maxObjectBytes = MaxObjectBytesLimit
	// minRAMChunk and maxRAMChunk bound ram.chunk_bytes: below 64 B the
	// per-chunk metadata outweighs the payload; above 1 MiB a small object
	// wastes most of its chunk. Powers of two keep chunks aligned.
	minRAMChunk Size = 64
	maxRAMChunk Size = 1 << 20
	// minTokenLen: a shorter shared secret is guessable by brute force
	// over the network; 16 bytes of random text is ≥ 96 bits (the same
	// rule as tenant tokens, auth.MinTokenLen).
	minTokenLen = auth.MinTokenLen
	// maxNodeNameLen keeps node names usable as metric labels and file
	// names.
	maxNodeNameLen = 64
	// minHeartbeat: below a millisecond a heartbeat is a busy loop.
	minHeartbeat = time.Millisecond
)

// Node is the effective configuration of one kvpool node. Every field
// holds its effective value (Load starts from Defaults); unlike an options
// struct, a zero field is not replaced by its default, so that an explicit
// "ram.bytes: 0" is an error rather than silently 1 GiB.
type Node struct {
	// Listen is the data-plane TCP address (key listen).
	Listen string
	// AdminListen serves /metrics and /health (key admin_listen).
	AdminListen string
	// RESPListen, when not empty, is the address of the node's Redis
	// front (key resp_listen): RESP2 clients reach the whole pool through
	// it. It needs a master.
	RESPListen string
	// RESPReplicas is the number of copies a SET through the Redis front
	// stores (key resp_replicas).
	RESPReplicas int
	// NodeName names the node to the master and in metrics; empty means
	// the node derives one from its listen address (key node_name).
	NodeName string
	// Master is the master's address, or a comma-separated list of a
	// cluster's masters; empty runs the node standalone (key master).
	Master string
	// Etcd lists etcd's client URLs, comma-separated, through which the
	// node finds its cluster's leading master (key etcd; needs
	// ClusterID, the election's name).
	Etcd string
	// ClusterID names the cluster the node is for (key cluster_id): when
	// set, the node joins only a master of that cluster ID, and such a
	// master only nodes carrying it (see package masterproto). Empty
	// joins a master without an ID.
	ClusterID string
	// HeartbeatInterval is how often the node reports to the master (key
	// heartbeat_interval).
	HeartbeatInterval time.Duration
	// BlockSize is the typical object size the tiers' eviction and
	// admission policies are sized for (key block_size). It is not a
	// limit: objects of 1 byte to MaxObjectBytes are stored.
	BlockSize Size
	// MaxObjectBytes is the largest object the node stores, at most
	// 512 MiB (key max_object_bytes); a larger Put is refused with its
	// size, this limit and the setting's name. A node whose RAM tier keeps
	// less takes less (EffectiveMaxObject).
	MaxObjectBytes Size
	// AuthToken is the shared secret clients present; empty disables
	// authentication (key auth_token). It never prints.
	AuthToken Secret
	// TenantTokensFile is the path of the tenant tokens file
	// (ReadTenantTokens); empty means no tenant tokens (key
	// tenant_tokens_file). Load reads it into TenantTokens.
	TenantTokensFile string
	// TenantTokens maps a tenant to its own token: a connection with it is
	// bound to that tenant (package auth). Load fills it from
	// TenantTokensFile; the tokens never print.
	TenantTokens map[string]Secret
	// SharedNamespaces are namespaces every authenticated connection may
	// read and their writers may write (key shared_namespaces, written
	// "public" or "public:alice,bob; docs", see ParseSharedNamespaces).
	SharedNamespaces []auth.Namespace
	// RAM is the RAM tier.
	RAM RAM
	// SSD is the SSD tier.
	SSD SSD
	// Promotion controls SSD→RAM promotion on hit.
	Promotion Promotion
	// Pacers limit each I/O path for live experiments.
	Pacers Pacers
	// Quota sets per-tenant byte quotas on the node's resident blocks.
	Quota Quota
}

// Quota configures per-tenant byte quotas: the bytes of a tenant's blocks
// resident on the node (RAM and SSD, each block once). A Put over quota
// is refused (kvpool.ErrQuota).
type Quota struct {
	// DefaultBytes is every tenant's quota unless Tenants names it; 0 is
	// unlimited (key quota.default_bytes).
	DefaultBytes Size
	// Tenants overrides the quota of named tenants, 0 meaning unlimited
	// (file key quota.tenants, a mapping of tenant name to size; file
	// only, no environment variable or flag).
	Tenants map[string]Size
}

// RAM configures the RAM tier.
type RAM struct {
	// Bytes is the tier's byte budget (key ram.bytes).
	Bytes Size
	// ChunkBytes is the RAM tier's chunk size (key ram.chunk_bytes): an
	// object occupies a chain of chunks, so this is the granule of its
	// waste. The node registers it with the master as its block size.
	ChunkBytes Size
	// Policy is the eviction policy, eviction[+admission] as
	// policy.ParseSpec reads it (key ram.policy).
	Policy string
	// HighWatermark and LowWatermark keep room in the RAM tier: past the
	// high share of its bytes (chunks) in use it evicts (demotes) down to
	// the low share, so promotions and bursts find free chunks (keys
	// ram.high_watermark, ram.low_watermark; Mooncake's
	// eviction_high_watermark_ratio 0.95 and eviction_ratio 0.05).
	HighWatermark, LowWatermark float64
}

// SSD configures the SSD tier (SSD offload).
type SSD struct {
	// Enabled turns SSD offload on (key ssd.enabled; Mooncake's
	// enable_ssd_offload).
	Enabled bool
	// Path is the tier's directory, absolute (key ssd.path; Mooncake's
	// ssd_offload_path).
	Path string
	// Bytes bounds the page files' and the side table's size (key
	// ssd.bytes).
	Bytes Size
	// Sync is the durability mode: none, batch or always (key ssd.sync).
	Sync ssd.SyncMode
	// HighWatermark and LowWatermark are the eviction watermarks, as
	// fractions of the pages (keys ssd.high_watermark, ssd.low_watermark).
	HighWatermark, LowWatermark float64
	// DirectIO opens the page files with O_DIRECT (key ssd.direct_io).
	DirectIO bool
}

// Promotion configures SSD→RAM promotion on hit.
type Promotion struct {
	// Threshold is the number of touches that makes an SSD block a
	// promotion candidate (key promotion.threshold).
	Threshold int
	// RAMWatermark: no promotion while the RAM tier's used share is above
	// it (key promotion.ram_watermark).
	RAMWatermark float64
	// QueueCap bounds pending promotions (key promotion.queue_cap).
	QueueCap int
	// MaxPerHeartbeat caps promotions per heartbeat; 0 disables promotion
	// (key promotion.max_per_heartbeat).
	MaxPerHeartbeat int
}

// Pacers are the per-path byte-rate limits of live experiments, in bytes
// per second; 0 is unlimited (keys pacers.net_egress, pacers.net_ingress,
// pacers.ssd_read, pacers.ssd_write).
type Pacers struct {
	NetEgress, NetIngress, SSDRead, SSDWrite Bandwidth
}

// EffectiveMaxObject is the largest object the node takes: MaxObjectBytes,
// capped by its RAM (every object passes through the store's RAM check,
// so a small test node need not lower max_object_bytes): with an SSD tier
// at the RAM size (an object larger than RAM keeps goes to SSD), without
// one at RAMKeeps — so the node advertises the limit it really has, and a
// client's error gives the right number. At least 0 (Validate refuses a
// RAM tier that keeps nothing).
func (n Node) EffectiveMaxObject() Size {
	if n.SSD.Enabled {
		return max(min(n.MaxObjectBytes, n.RAM.Bytes), 0)
	}
	return max(min(n.MaxObjectBytes, n.RAMKeeps()), 0)
}

// RAMKeeps is the most an object (its name and payload) may take for the
// RAM tier to keep it resident, as the tier computes it (ram's
// keepChunks): all its chunks when the high watermark is all of them,
// else the low watermark's. A larger one would be evicted by the Put that
// stored it (past the high watermark the tier trims down to the low one,
// the newest last), so the RAM tier refuses it and the store writes it to
// SSD, or refuses it without one. A named object within its name's length
// of the bound is refused by the RAM tier, not by the node's advertised
// limit.
func (n Node) RAMKeeps() Size {
	cs := n.RAM.ChunkBytes
	if cs <= 0 || n.RAM.Bytes <= 0 {
		return 0
	}
	chunks := int64(n.RAM.Bytes / cs)
	high := min(max(int64(math.Ceil(n.RAM.HighWatermark*float64(chunks)-1e-9)), 1), chunks)
	if high >= chunks {
		return Size(chunks) * cs
	}
	low := min(max(int64(math.Floor(n.RAM.LowWatermark*float64(chunks)+1e-9)), 0), high)
	return Size(low) * cs
}

// Defaults returns the default configuration.
func Defaults() Node {
	return Node{
		Listen:            DefaultListen,
		AdminListen:       DefaultAdminListen,
		RESPReplicas:      DefaultRESPReplicas,
		HeartbeatInterval: DefaultHeartbeatInterval,
		BlockSize:         DefaultBlockSize,
		MaxObjectBytes:    DefaultMaxObjectBytes,
		RAM: RAM{Bytes: DefaultRAMBytes, ChunkBytes: DefaultRAMChunkBytes, Policy: DefaultRAMPolicy,
			HighWatermark: DefaultRAMHighWatermark, LowWatermark: DefaultRAMLowWatermark},
		SSD: SSD{
			Bytes:         DefaultSSDBytes,
			Sync:          DefaultSSDSync,
			HighWatermark: DefaultSSDHighWatermark,
			LowWatermark:  DefaultSSDLowWatermark,
		},
		Promotion: Promotion{
			Threshold:       DefaultPromotionThreshold,
			RAMWatermark:    DefaultPromotionRAMWatermark,
			QueueCap:        DefaultPromotionQueueCap,
			MaxPerHeartbeat: DefaultMaxPerHeartbeat,
		},
	}
}

// Secret is a string that never prints: every fmt verb, slog and text
// marshalling show "[redacted]" (or "" when it is empty). Reveal returns
// the value for the one place that needs it.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]", or "" for an empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString is String, for %#v.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// Format writes String for every verb, so that %v, %+v, %s, %q, %x and
// %#v of a struct holding a Secret never show it.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' || (verb == 'v' && f.Flag('#')) {
		fmt.Fprint(f, strconv.Quote(s.String()))
		return
	}
	fmt.Fprint(f, s.String())
}

// LogValue redacts the secret in log/slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText redacts the secret in JSON, YAML and other text encodings.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// FieldError is a bad configuration value: the field's key, its value (as
// written, redacted for secrets), where the value came from, and why it is
// bad.
type FieldError struct {
	Key    string
	Value  string
	Origin Origin // zero when unknown (Node.Validate called directly)
	Reason string
}

// Error formats `ssd.path: "" (from env KVPOOL_SSD_PATH): required when
// SSD offload is on`.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Key)
	b.WriteString(": ")
	b.WriteString(strconv.Quote(e.Value))
	if e.Origin.Source != 0 {
		b.WriteString(" (from ")
		b.WriteString(e.Origin.String())
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Validate checks every field and returns one *FieldError per bad field,
// joined (errors.Join), in key order; nil when the configuration is
// usable. It does no I/O: CheckSSDDir checks the SSD directory itself.
func (n Node) Validate() error {
	errs := n.fieldErrors()
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// fieldErrors returns the bad fields, without origins, section by
// section in the order of the configuration file.
func (n Node) fieldErrors() []*FieldError {
	var errs []*FieldError
	bad := func(key string, value any, format string, a ...any) {
		v := fmt.Sprint(value)
		if sz, ok := value.(Size); ok {
			v = sz.exact()
		}
		errs = append(errs, &FieldError{Key: key, Value: v, Reason: fmt.Sprintf(format, a...)})
	}
	n.validateServing(bad)
	n.validateAuthToken(bad)
	n.validateAuth(bad)
	n.validateRAM(bad)
	n.SSD.validate(n.BlockSize, bad)
	n.validateQuota(bad)
	n.validatePromotion(bad)
	n.validatePacers(bad)
	return errs
}

// validateServing checks the addresses, the node name, the heartbeat
// interval and the block size.
func (n Node) validateServing(bad func(key string, value any, format string, a ...any)) {
	if err := checkAddr(n.Listen, true); err != nil {
		bad("listen", n.Listen, "%v", err)
	}
	if err := checkAddr(n.AdminListen, true); err != nil {
		bad("admin_listen", n.AdminListen, "%v", err)
	} else if n.AdminListen == n.Listen && !strings.HasSuffix(n.Listen, ":0") {
		bad("admin_listen", n.AdminListen, "the same address as listen")
	}
	if n.RESPListen != "" {
		switch err := checkAddr(n.RESPListen, true); {
		case err != nil:
			bad("resp_listen", n.RESPListen, "%v", err)
		case !strings.HasSuffix(n.RESPListen, ":0") && (n.RESPListen == n.Listen || n.RESPListen == n.AdminListen):
			bad("resp_listen", n.RESPListen, "the same address as listen or admin_listen")
		case n.Master == "" && n.Etcd == "":
			bad("resp_listen", n.RESPListen, "the Redis front serves the pool and needs a master (set master or etcd)")
		}
	}
	if n.RESPReplicas < 1 || n.RESPReplicas > 8 {
		bad("resp_replicas", n.RESPReplicas, "want 1 to 8 copies")
	}
	if n.NodeName != "" {
		if err := checkNodeName(n.NodeName); err != nil {
			bad("node_name", n.NodeName, "%v", err)
		}
	}
	if n.Master != "" {
		for a := range strings.SplitSeq(n.Master, ",") {
			if err := checkAddr(strings.TrimSpace(a), false); err != nil {
				if a == n.Master {
					bad("master", n.Master, "%v", err)
				} else {
					bad("master", n.Master, "%q: %v (a list is comma-separated)", a, err)
				}
				break
			}
		}
	}
	if n.Etcd != "" {
		switch _, err := SplitURLs(n.Etcd); {
		case err != nil:
			bad("etcd", n.Etcd, "%v", err)
		case n.ClusterID == "":
			bad("etcd", n.Etcd, "set cluster_id: the masters campaign under their cluster ID")
		}
	}
	if err := meta.CheckClusterID(n.ClusterID); err != nil {
		bad("cluster_id", n.ClusterID, "%v", err)
	}
	if n.HeartbeatInterval < minHeartbeat {
		bad("heartbeat_interval", n.HeartbeatInterval, "want at least %v", minHeartbeat)
	}
	if n.BlockSize <= 0 || n.BlockSize > maxBlockSize {
		bad("block_size", n.BlockSize, "want 1 B to %v", maxBlockSize)
	}
	if n.MaxObjectBytes <= 0 || n.MaxObjectBytes > maxObjectBytes {
		bad("max_object_bytes", n.MaxObjectBytes, "want 1 B to %v", maxObjectBytes)
	}
}

// validateAuthToken checks the cluster token; no error shows it.
func (n Node) validateAuthToken(bad func(key string, value any, format string, a ...any)) {
	if n.AuthToken != "" {
		tok := n.AuthToken.Reveal()
		switch {
		case len(tok) < minTokenLen:
			bad("auth_token", n.AuthToken, "shorter than %d bytes (guessable); use a random token", minTokenLen)
		case strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			bad("auth_token", n.AuthToken, "contains spaces or control characters")
		}
	}
}

// validateRAM checks the RAM tier's size, policy and watermarks.
func (n Node) validateRAM(bad func(key string, value any, format string, a ...any)) {
	c := n.RAM.ChunkBytes
	chunkOK := c >= minRAMChunk && c <= maxRAMChunk && c&(c-1) == 0
	switch {
	case n.RAM.Bytes <= 0:
		bad("ram.bytes", n.RAM.Bytes, "want a positive size")
	case n.RAM.Bytes < n.BlockSize:
		// The eviction policy is sized for ram.bytes/block_size objects.
		bad("ram.bytes", n.RAM.Bytes, "smaller than block_size %v, the typical object size the RAM eviction policy is sized for (lower block_size)", n.BlockSize)
	case chunkOK && int64(n.RAM.Bytes/c) > ram.MaxChunks:
		bad("ram.bytes", n.RAM.Bytes, "makes %d chunks of %v (ram.chunk_bytes), limit %d", n.RAM.Bytes/c, c, ram.MaxChunks)
	}
	switch {
	case !chunkOK:
		bad("ram.chunk_bytes", c, "want a power of two from %v to %v", minRAMChunk, maxRAMChunk)
	case n.RAM.Bytes > 0 && c > n.RAM.Bytes:
		bad("ram.chunk_bytes", c, "larger than the RAM tier (ram.bytes %v)", n.RAM.Bytes)
	case !n.SSD.Enabled && n.RAM.Bytes > 0 && n.RAM.LowWatermark > 0 && n.RAMKeeps() < 1:
		bad("ram.bytes", n.RAM.Bytes, "keeps no object resident: ram.low_watermark %v of it is less than one chunk of %v", n.RAM.LowWatermark, c)
	}
	if spec, err := policy.ParseSpec(n.RAM.Policy); err != nil {
		bad("ram.policy", n.RAM.Policy, "%v", err)
	} else if spec.NeedsFuture() {
		bad("ram.policy", n.RAM.Policy, "%s needs to know the future (simulator only)", spec.Eviction)
	}
	if !(n.RAM.HighWatermark > 0 && n.RAM.HighWatermark <= 1) {
		bad("ram.high_watermark", n.RAM.HighWatermark, "want a fraction in (0, 1]")
	}
	if !(n.RAM.LowWatermark > 0 && n.RAM.LowWatermark <= 1) {
		bad("ram.low_watermark", n.RAM.LowWatermark, "want a fraction in (0, 1]")
	} else if n.RAM.LowWatermark > n.RAM.HighWatermark {
		bad("ram.low_watermark", n.RAM.LowWatermark, "above ram.high_watermark %v", n.RAM.HighWatermark)
	}
}

// validateQuota checks the default quota and every tenant's, in tenant
// order.
func (n Node) validateQuota(bad func(key string, value any, format string, a ...any)) {
	if n.Quota.DefaultBytes < 0 {
		bad("quota.default_bytes", n.Quota.DefaultBytes, "negative (0 is unlimited)")
	}
	tenants := make([]string, 0, len(n.Quota.Tenants))
	for name := range n.Quota.Tenants {
		tenants = append(tenants, name)
	}
	sort.Strings(tenants)
	for _, name := range tenants {
		key := "quota.tenants." + name
		if err := (block.Key{Tenant: name}).Validate(); err != nil {
			bad(key, name, "%v", err)
		} else if v := n.Quota.Tenants[name]; v < 0 {
			bad(key, v, "negative (0 is unlimited)")
		}
	}
}

// validatePromotion checks the SSD-to-RAM promotion settings.
func (n Node) validatePromotion(bad func(key string, value any, format string, a ...any)) {
	p := n.Promotion
	if p.Threshold < 1 {
		bad("promotion.threshold", p.Threshold, "want at least 1 touch")
	}
	if !(p.RAMWatermark > 0 && p.RAMWatermark <= 1) {
		bad("promotion.ram_watermark", p.RAMWatermark, "want a fraction in (0, 1]")
	}
	if p.QueueCap < 1 {
		bad("promotion.queue_cap", p.QueueCap, "want at least 1")
	}
	if p.MaxPerHeartbeat < 0 {
		bad("promotion.max_per_heartbeat", p.MaxPerHeartbeat, "negative (0 disables promotion)")
	}
}

// validatePacers checks the bandwidth limits.
func (n Node) validatePacers(bad func(key string, value any, format string, a ...any)) {
	for _, pc := range []struct {
		key string
		v   Bandwidth
	}{
		{"pacers.net_egress", n.Pacers.NetEgress},
		{"pacers.net_ingress", n.Pacers.NetIngress},
		{"pacers.ssd_read", n.Pacers.SSDRead},
		{"pacers.ssd_write", n.Pacers.SSDWrite},
	} {
		if !(pc.v >= 0 && !math.IsInf(float64(pc.v), 1)) {
			bad(pc.key, float64(pc.v), "want a finite rate ≥ 0 bytes/s (0 is unlimited)")
		}
	}
}

// validateAuth checks the tenant tokens against the cluster token, then
// the shared namespaces against the tokens; no error shows a token.
func (n Node) validateAuth(bad func(key string, value any, format string, a ...any)) {
	tokensKey, tokensValue := "tenant_tokens_file", any(n.TenantTokensFile)
	if n.TenantTokensFile == "" && len(n.TenantTokens) > 0 {
		tokensValue = fmt.Sprintf("%d tenant tokens", len(n.TenantTokens))
	}
	if len(n.TenantTokens) > 0 && n.AuthToken == "" {
		bad(tokensKey, tokensValue, "tenant tokens need auth_token too: nodes and operators authenticate with it")
		return
	}
	if err := AuthOptions(n.AuthToken, n.TenantTokens, nil).Validate(); err != nil {
		bad(tokensKey, tokensValue, "%v", err)
		return
	}
	if err := n.AuthOptions().Validate(); err != nil {
		bad("shared_namespaces", FormatSharedNamespaces(n.SharedNamespaces), "%v", err)
	}
}

func (s SSD) validate(blockSize Size, bad func(key string, value any, format string, a ...any)) {
	if s.Path != "" {
		if err := checkSSDPath(s.Path); err != nil {
			bad("ssd.path", s.Path, "%v", err)
		}
	} else if s.Enabled {
		bad("ssd.path", s.Path, "required when SSD offload is on")
	}
	if s.Bytes < 0 {
		bad("ssd.bytes", s.Bytes, "negative")
	} else if s.Enabled && blockSize > 0 && blockSize <= maxBlockSize && int64(s.Bytes) < ssd.SlotSize(int(blockSize)) {
		bad("ssd.bytes", s.Bytes, "holds no object of block_size %v (%v in pages with its key and page metadata)", blockSize, Size(ssd.SlotSize(int(blockSize))))
	}
	if _, err := ssd.ParseSyncMode(string(s.Sync)); err != nil || s.Sync == "" {
		bad("ssd.sync", s.Sync, "want none, batch or always")
	}
	if !(s.HighWatermark > 0 && s.HighWatermark <= 1) {
		bad("ssd.high_watermark", s.HighWatermark, "want a fraction in (0, 1]")
	}
	if !(s.LowWatermark > 0 && s.LowWatermark <= 1) {
		bad("ssd.low_watermark", s.LowWatermark, "want a fraction in (0, 1]")
	} else if s.LowWatermark > s.HighWatermark {
		bad("ssd.low_watermark", s.LowWatermark, "above ssd.high_watermark %v", s.HighWatermark)
	}
	if s.Enabled && s.DirectIO && vfs.ODirect == 0 {
		bad("ssd.direct_io", s.DirectIO, "O_DIRECT does not exist on this platform")
	}
}

// checkAddr checks a host:port address; port 0 (any free port) is allowed
// for listen addresses only.
func checkAddr(addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port (%v)", err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("port %q is not a number in 0–65535", port)
	}
	if !listen {
		if host == "" {
			return errors.New("no host")
		}
		if p == 0 {
			return errors.New("port 0")
		}
	}
	return nil
}

func checkNodeName(s string) error {
	if len(s) > maxNodeNameLen {
		return fmt.Errorf("longer than %d bytes", maxNodeNameLen)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("character %q: want letters, digits, '.', '_' and '-'", r)
		}
	}
	return nil
}

// SplitURLs splits a comma-separated list of etcd client URLs
// (http://host:port or https://host:port) and says which one is wrong.
func SplitURLs(list string) ([]string, error) {
	var out []string
	for u := range strings.SplitSeq(list, ",") {
		u = strings.TrimSpace(u)
		rest, ok := strings.CutPrefix(u, "http://")
		if !ok {
			rest, ok = strings.CutPrefix(u, "https://")
		}
		if !ok {
			return nil, fmt.Errorf("%q: want a URL such as http://127.0.0.1:2379", u)
		}
		if err := checkAddr(strings.TrimSuffix(rest, "/"), false); err != nil {
			return nil, fmt.Errorf("%q: %v", u, err)
		}
		out = append(out, u)
	}
	return out, nil
}
