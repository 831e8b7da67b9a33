package respserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
)

// checkKeys answers and returns false when a key is not a valid kvpool
// object name (1 to block.MaxNameLen bytes; Redis allows the empty key
// and longer ones, kvpool's names do not).
func (c *conn) checkKeys(keys [][]byte) bool {
	for _, k := range keys {
		if len(k) == 0 || len(k) > block.MaxNameLen {
			c.fail(fmt.Sprintf("ERR kvpool keys are 1 to %d bytes; this one is %d", block.MaxNameLen, len(k)))
			return false
		}
	}
	return true
}

// keyNames returns keys as strings in a reused slice.
func (c *conn) keyNames(keys [][]byte) []string {
	c.names = c.names[:0]
	for _, k := range keys {
		c.names = append(c.names, string(k))
	}
	return c.names
}

// backendError answers a pool failure in Redis's terms.
func (c *conn) backendError(err error) {
	switch {
	case errors.Is(err, kvpool.ErrQuota):
		c.fail("OOM command not allowed: " + err.Error())
	case errors.Is(err, kvpool.ErrTooLarge):
		c.fail("ERR value too large: " + err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		c.fail("ERR kvpool: the pool did not answer in time: " + err.Error())
	default:
		c.fail("ERR kvpool: " + err.Error())
	}
}

func cmdGet(c *conn, ctx context.Context, args [][]byte) {
	if !c.checkKeys(args[1:2]) {
		return
	}
	c.get(ctx, string(args[1]))
}

// get writes name's value, or a null bulk when it is absent.
func (c *conn) get(ctx context.Context, name string) {
	err := c.s.opts.Backend.Get(ctx, c.tenant, name, func(value [][]byte) error {
		c.w.BulkSegments(value)
		// Large pieces are written from where they lie, so they must go
		// out before the backend lets them go.
		if c.w.Buffered() >= 64<<10 {
			return c.w.Flush()
		}
		return nil
	})
	switch {
	case err == nil:
	case errors.Is(err, kvpool.ErrNotFound):
		c.w.Null()
	case c.w.Err() != nil: // the reply was being written: the connection is gone
	default:
		c.backendError(err)
	}
}

func cmdMGet(c *conn, ctx context.Context, args [][]byte) {
	keys := args[1:]
	// MGET answers an invalid key as absent, as Redis answers a key of
	// another type.
	c.w.Array(len(keys))
	for _, k := range keys {
		if len(k) == 0 || len(k) > block.MaxNameLen {
			c.w.Null()
			continue
		}
		c.get(ctx, string(k))
	}
}

// setArgs are SET's options.
type setArgs struct {
	nx, xx, get, keepTTL bool
	expireAt             int64 // Unix ms; 0 none
}

// parseSet parses SET's options as Redis 7 does; false when it answered
// an error.
func (c *conn) parseSet(opts [][]byte) (setArgs, bool) {
	var a setArgs
	expire := false
	for i := 0; i < len(opts); i++ {
		o := opts[i]
		switch {
		case equalFold(o, "nx") && !a.xx:
			a.nx = true
		case equalFold(o, "xx") && !a.nx:
			a.xx = true
		case equalFold(o, "get"):
			a.get = true
		case equalFold(o, "keepttl") && !expire:
			a.keepTTL = true
		case (equalFold(o, "ex") || equalFold(o, "px") || equalFold(o, "exat") || equalFold(o, "pxat")) && !expire && !a.keepTTL && i+1 < len(opts):
			n, ok := parseInt(opts[i+1])
			if !ok {
				c.notInteger()
				return a, false
			}
			at, ok := c.expiry(o, n)
			if !ok {
				c.fail("ERR invalid expire time in 'set' command")
				return a, false
			}
			a.expireAt, expire = at, true
			i++
		default:
			c.syntaxError()
			return a, false
		}
	}
	return a, true
}

// expiry turns an EX/PX/EXAT/PXAT amount into Unix milliseconds; false
// when Redis would call it invalid (not positive, or overflowing).
func (c *conn) expiry(unit []byte, n int64) (int64, bool) {
	if n <= 0 {
		return 0, false
	}
	now := c.s.opts.Now().UnixMilli()
	switch {
	case equalFold(unit, "ex"):
		if n > (math.MaxInt64-now)/1000 {
			return 0, false
		}
		return now + n*1000, true
	case equalFold(unit, "px"):
		if n > math.MaxInt64-now {
			return 0, false
		}
		return now + n, true
	case equalFold(unit, "exat"):
		if n > math.MaxInt64/1000 {
			return 0, false
		}
		return n * 1000, true
	}
	return n, true // pxat
}

func cmdSet(c *conn, ctx context.Context, args [][]byte) {
	a, ok := c.parseSet(args[3:])
	if !ok || !c.checkKeys(args[1:2]) {
		return
	}
	name := string(args[1])
	b := c.s.opts.Backend
	if !(a.nx || a.xx || a.get || a.keepTTL) {
		c.set(ctx, name, args[2], SetOptions{ExpireAt: a.expireAt})
		return
	}
	unlock := c.s.keys.lock(c.tenant, name)
	defer unlock()
	var old []byte
	present := false
	if a.get {
		err := b.Get(ctx, c.tenant, name, func(v [][]byte) error {
			for _, p := range v {
				old = append(old, p...)
			}
			return nil
		})
		switch {
		case err == nil:
			present = true
		case !errors.Is(err, kvpool.ErrNotFound):
			c.backendError(err)
			return
		}
	} else if a.nx || a.xx {
		ex, err := b.Exists(ctx, c.tenant, []string{name})
		if err != nil {
			c.backendError(err)
			return
		}
		present = ex[0]
	}
	reply := func() {
		if !a.get {
			c.w.Null()
		} else if present {
			c.w.Bulk(old)
		} else {
			c.w.Null()
		}
	}
	if (a.nx && present) || (a.xx && !present) {
		reply()
		return
	}
	if err := b.Set(ctx, c.tenant, name, args[2], SetOptions{ExpireAt: a.expireAt, KeepTTL: a.keepTTL}); err != nil {
		c.backendError(err)
		return
	}
	if a.get {
		reply()
		return
	}
	c.w.Simple("OK")
}

// set stores one value and answers +OK.
// Plain SETs of one key that overlap are stored once for all (setGroups).
func (c *conn) set(ctx context.Context, name string, value []byte, o SetOptions) {
	tenant := c.tenant
	store := func(ctx context.Context, value []byte) error {
		// A coalesced store answers other connections' SETs too: neither
		// this client leaving nor the time it already waited may fail them.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.s.opts.RequestTimeout)
		defer cancel()
		unlock := c.s.keys.lock(tenant, name)
		defer unlock()
		return c.s.opts.Backend.Set(ctx, tenant, name, value, o)
	}
	var err error
	if o == (SetOptions{}) {
		err = c.s.sets.set(ctx, tenant, name, value, store)
	} else {
		err = store(ctx, value)
	}
	if err != nil {
		c.backendError(err)
		return
	}
	c.w.Simple("OK")
}

func cmdMSet(c *conn, ctx context.Context, args [][]byte) {
	if len(args)%2 != 1 {
		c.fail("ERR wrong number of arguments for 'mset' command")
		return
	}
	for i := 1; i < len(args); i += 2 {
		if !c.checkKeys(args[i : i+1]) {
			return
		}
	}
	for i := 1; i < len(args); i += 2 {
		name := string(args[i])
		unlock := c.s.keys.lock(c.tenant, name)
		err := c.s.opts.Backend.Set(ctx, c.tenant, name, args[i+1], SetOptions{})
		unlock()
		if err != nil {
			c.backendError(fmt.Errorf("key %d of %d (%q): %w", (i+1)/2, len(args)/2, clip(args[i]), err))
			return
		}
	}
	c.w.Simple("OK")
}

func cmdStrlen(c *conn, ctx context.Context, args [][]byte) {
	if !c.checkKeys(args[1:2]) {
		return
	}
	n, err := c.s.opts.Backend.Len(ctx, c.tenant, string(args[1]))
	switch {
	case errors.Is(err, kvpool.ErrNotFound):
		c.w.Int(0)
	case err != nil:
		c.backendError(err)
	default:
		c.w.Int(n)
	}
}

// exists answers which of keys are present; false when it answered an
// error instead.
func (c *conn) exists(ctx context.Context, keys [][]byte) ([]bool, bool) {
	if !c.checkKeys(keys) {
		return nil, false
	}
	present, err := c.s.opts.Backend.Exists(ctx, c.tenant, c.keyNames(keys))
	if err != nil {
		c.backendError(err)
		return nil, false
	}
	return present, true
}

func cmdExists(c *conn, ctx context.Context, args [][]byte) {
	present, ok := c.exists(ctx, args[1:])
	if !ok {
		return
	}
	n := 0
	for _, p := range present {
		if p {
			n++
		}
	}
	c.w.Int(int64(n))
}

// cmdPrefix is KVPOOL.PREFIX key...: the number of leading keys present.
func cmdPrefix(c *conn, ctx context.Context, args [][]byte) {
	present, ok := c.exists(ctx, args[1:])
	if !ok {
		return
	}
	n := 0
	for n < len(present) && present[n] {
		n++
	}
	c.w.Int(int64(n))
}

func cmdDel(c *conn, ctx context.Context, args [][]byte) {
	if !c.checkKeys(args[1:]) {
		return
	}
	names := c.keyNames(args[1:])
	// Duplicates count once, as Redis deletes a key once.
	seen := make(map[string]bool, len(names))
	uniq := names[:0:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			uniq = append(uniq, n)
		}
	}
	n, err := c.s.opts.Backend.Delete(ctx, c.tenant, uniq)
	if err != nil {
		c.backendError(err)
		return
	}
	c.w.Int(int64(n))
}

func cmdTTL(c *conn, ctx context.Context, args [][]byte) {
	if !c.checkKeys(args[1:2]) {
		return
	}
	at, err := c.s.opts.Backend.ExpireAt(ctx, c.tenant, string(args[1]))
	switch {
	case errors.Is(err, kvpool.ErrNotFound):
		c.w.Int(-2)
		return
	case err != nil:
		c.backendError(err)
		return
	case at == 0:
		c.w.Int(-1)
		return
	}
	left := max(at-c.s.opts.Now().UnixMilli(), 0)
	if equalFold(args[0], "ttl") {
		left = (left + 500) / 1000
	}
	c.w.Int(left)
}

func cmdExpire(c *conn, ctx context.Context, args [][]byte) {
	n, ok := parseInt(args[2])
	if !ok {
		c.notInteger()
		return
	}
	var nx, xx, gt, lt bool
	for _, o := range args[3:] {
		switch {
		case equalFold(o, "nx"):
			nx = true
		case equalFold(o, "xx"):
			xx = true
		case equalFold(o, "gt"):
			gt = true
		case equalFold(o, "lt"):
			lt = true
		default:
			c.fail("ERR Unsupported option " + string(o))
			return
		}
	}
	switch {
	case nx && (xx || gt || lt):
		c.fail("ERR NX and XX, GT or LT options at the same time are not compatible")
		return
	case gt && lt:
		c.fail("ERR GT and LT options at the same time are not compatible")
		return
	}
	if !c.checkKeys(args[1:2]) {
		return
	}
	now := c.s.opts.Now().UnixMilli()
	unit := int64(1)
	if equalFold(args[0], "expire") {
		unit = 1000
	}
	if n > (math.MaxInt64-now)/unit || n < (math.MinInt64+now)/unit {
		c.fail("ERR invalid expire time in '" + string(c.lower) + "' command")
		return
	}
	at := now + n*unit
	if at <= 0 {
		at = 1 // a time before 1970 is past: the key expires now
	}
	name := string(args[1])
	b := c.s.opts.Backend
	unlock := c.s.keys.lock(c.tenant, name)
	defer unlock()
	if nx || xx || gt || lt {
		cur, err := b.ExpireAt(ctx, c.tenant, name)
		if errors.Is(err, kvpool.ErrNotFound) {
			c.w.Int(0)
			return
		}
		if err != nil {
			c.backendError(err)
			return
		}
		// Redis: a key with no expiry has an infinite TTL for GT and LT.
		skip := (nx && cur != 0) || (xx && cur == 0) ||
			(gt && (cur == 0 || at <= cur)) || (lt && cur != 0 && at >= cur)
		if skip {
			c.w.Int(0)
			return
		}
	}
	applied, err := b.SetExpireAt(ctx, c.tenant, name, at)
	if err != nil {
		c.backendError(err)
		return
	}
	c.w.Int(boolInt(applied))
}

func cmdPersist(c *conn, ctx context.Context, args [][]byte) {
	if !c.checkKeys(args[1:2]) {
		return
	}
	name := string(args[1])
	b := c.s.opts.Backend
	unlock := c.s.keys.lock(c.tenant, name)
	defer unlock()
	cur, err := b.ExpireAt(ctx, c.tenant, name)
	switch {
	case errors.Is(err, kvpool.ErrNotFound):
		c.w.Int(0)
		return
	case err != nil:
		c.backendError(err)
		return
	case cur == 0:
		c.w.Int(0)
		return
	}
	applied, err := b.SetExpireAt(ctx, c.tenant, name, 0)
	if err != nil {
		c.backendError(err)
		return
	}
	c.w.Int(boolInt(applied))
}

func cmdType(c *conn, ctx context.Context, args [][]byte) {
	if !c.checkKeys(args[1:2]) {
		return
	}
	present, err := c.s.opts.Backend.Exists(ctx, c.tenant, []string{string(args[1])})
	if err != nil {
		c.backendError(err)
		return
	}
	if present[0] {
		c.w.Simple("string")
	} else {
		c.w.Simple("none")
	}
}

func cmdScan(c *conn, ctx context.Context, args [][]byte) {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		c.fail("ERR invalid cursor")
		return
	}
	count := 10
	var match []byte
	typ := ""
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			c.syntaxError()
			return
		}
		o, v := args[i], args[i+1]
		switch {
		case equalFold(o, "count"):
			n, ok := parseInt(v)
			if !ok {
				c.notInteger()
				return
			}
			if n < 1 {
				c.syntaxError()
				return
			}
			count = int(min(n, 1<<20))
		case equalFold(o, "match"):
			match = v
		case equalFold(o, "type"):
			typ = string(v)
		default:
			c.syntaxError()
			return
		}
	}
	next, names, err := c.s.opts.Backend.Scan(ctx, c.tenant, cursor, count)
	if err != nil {
		c.backendError(err)
		return
	}
	out := names[:0]
	for _, n := range names {
		if typ != "" && !equalFold([]byte(typ), "string") {
			continue
		}
		if match != nil && !globMatch(match, []byte(n), false) {
			continue
		}
		out = append(out, n)
	}
	c.w.Array(2)
	c.w.BulkString(strconv.FormatUint(next, 10))
	c.w.Array(len(out))
	for _, n := range out {
		c.w.BulkString(n)
	}
}

func cmdDBSize(c *conn, ctx context.Context, _ [][]byte) {
	n, err := c.s.opts.Backend.Count(ctx, c.tenant)
	if err != nil {
		c.backendError(err)
		return
	}
	c.w.Int(n)
}

// cmdFlushDB deletes every key of the tenant: SCAN and DEL until the scan
// is done. Keys SET meanwhile may survive, as in Redis's FLUSHDB ASYNC.
func cmdFlushDB(c *conn, ctx context.Context, args [][]byte) {
	if len(args) > 2 || (len(args) == 2 && !equalFold(args[1], "sync") && !equalFold(args[1], "async")) {
		c.syntaxError()
		return
	}
	b := c.s.opts.Backend
	var cursor uint64
	for {
		// Each batch within RequestTimeout: a large tenant takes many.
		bctx, cancel := context.WithTimeout(ctx, c.s.opts.RequestTimeout)
		next, names, err := b.Scan(bctx, c.tenant, cursor, 1000)
		if err == nil && len(names) > 0 {
			_, err = b.Delete(bctx, c.tenant, names)
		}
		cancel()
		if err != nil {
			c.backendError(err)
			return
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	c.w.Simple("OK")
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
