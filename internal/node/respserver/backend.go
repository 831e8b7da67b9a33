package respserver

import "context"

// Backend is the pool the front serves. Every call is for one tenant, the
// connection's, and every name is a valid kvpool object name (1 to
// block.MaxNameLen bytes; the front checks). Calls are bounded by ctx.
// Implementations are safe for concurrent use. Absent or expired keys are
// reported as kvpool.ErrNotFound where an error is the answer.
type Backend interface {
	// Get calls fn with the value of name, verified against its checksum
	// before fn sees a byte: its pieces in order, valid only while fn
	// runs. A key that is absent, expired, or whose every copy failed
	// verification is kvpool.ErrNotFound.
	Get(ctx context.Context, tenant, name string, fn func(value [][]byte) error) error
	// Set stores value under name, replacing any value it had, and gives
	// it the expiry o says. It returns once the value is stored on the
	// nodes placement chose and every node's front finds it.
	Set(ctx context.Context, tenant, name string, value []byte, o SetOptions) error
	// Exists reports which of names are present and not expired.
	Exists(ctx context.Context, tenant string, names []string) ([]bool, error)
	// Delete deletes names wherever they are and returns how many were
	// present (expired ones do not count). When it returns, no front finds
	// them.
	Delete(ctx context.Context, tenant string, names []string) (int, error)
	// Len returns the length of name's value (kvpool.ErrNotFound when
	// absent).
	Len(ctx context.Context, tenant, name string) (int64, error)
	// ExpireAt returns name's expiry in Unix milliseconds, 0 for none
	// (kvpool.ErrNotFound when absent).
	ExpireAt(ctx context.Context, tenant, name string) (int64, error)
	// SetExpireAt sets name's expiry (at > 0, Unix milliseconds; a time
	// passed expires it at once) or removes it (at == 0). It reports false
	// when name is absent.
	SetExpireAt(ctx context.Context, tenant, name string, at int64) (bool, error)
	// Scan returns names of the tenant from cursor on (0 starts) and the
	// cursor to continue from (0 when done), Redis SCAN's contract: a key
	// present for the whole iteration is returned at least once; count is
	// a hint.
	Scan(ctx context.Context, tenant string, cursor uint64, count int) (next uint64, names []string, err error)
	// Count returns the number of the tenant's keys (DBSIZE).
	Count(ctx context.Context, tenant string) (int64, error)
	// Info returns the figures INFO shows.
	Info(ctx context.Context, tenant string) (Info, error)
}

// SetOptions are a Set's expiry.
type SetOptions struct {
	// ExpireAt, when > 0, is the new value's expiry in Unix milliseconds.
	ExpireAt int64
	// KeepTTL keeps the expiry the key had (SET ... KEEPTTL).
	KeepTTL bool
}

// Info are the pool's figures for INFO: what this node holds, and what
// its front did.
type Info struct {
	// Node is the node's name; Role "master" (standalone) as Redis names
	// a server that is not a replica.
	Node string
	// Tiers are the node's tiers, RAM first.
	Tiers []TierInfo
	// UsedBytes is what the node's RAM tier holds, MaxBytes its capacity
	// (Redis's used_memory and maxmemory); Policy the eviction policy
	// (Redis's maxmemory-policy), PolicyKvpool kvpool's name for it.
	UsedBytes, MaxBytes  int64
	Policy, PolicyKvpool string
	// Keys and Expires are the tenant's keys and those with an expiry,
	// pool-wide (INFO keyspace).
	Keys, Expires int64
	// Hits and misses of this front's GETs by where the value came from.
	HitsLocalRAM, HitsLocalSSD, HitsRemote, Misses uint64
	// CorruptCopies counts copies that failed verification on the way to
	// a client (none of their bytes was sent).
	CorruptCopies uint64
	// OwnReads counts GETs served from this node's copy without asking
	// the master; InPlaceSets the SETs that overwrote this node's only
	// copy without a placement.
	OwnReads, InPlaceSets uint64
	// Promotions completed by this node (SSD → RAM).
	Promotions uint64
	// Nodes is the number of live nodes of the pool.
	Nodes int
}

// TierInfo is one tier of the node.
type TierInfo struct {
	Name                     string
	Objects, Bytes, Capacity int64
	Hits, Misses, Evictions  uint64
	Corruptions              uint64
}
