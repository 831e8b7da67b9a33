package masterproto

import (
	"fmt"
	"slices"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/meta"
)

// Body sizes of fixed-size entries, in bytes.
const (
	helloLen      = 12 // magic, version, token length, reserved
	helloReplyLen = 24 // magic, version, code, 3 limits, message length, reserved
	itemLen       = 24 // tenant index, tier, reserved, checksum, id, size
	itemKeyLen    = 12 // tenant index, tier, reserved, id
	moveLen       = 12 // tenant index, from, to, id
	hitLen        = 10 // tenant index, id
	resultLen     = 17 // id, bytes, ok
	taskLen       = 20 // id, kind, reserved, tenant index, key id
	replicaLen    = 16 // node index, tier, reserved, checksum, size
	targetMinLen  = 2  // node ID length, address length
	nodeStatusMin = 2 + 3*8 + 8 + 1 + 2*8 + 4*8 + 5*4
	queryEntryMin = 2 + 1 + 1 + 4 + 8 + 8
)

// newDec checks h against the op a decoder expects and returns a decoder
// of body.
func newDec(h Header, body []byte, want Op, lim Limits) (dec, error) {
	return newDecFlags(h, body, want, lim, 0)
}

// newDecFlags is newDec for an op whose header may carry the flags in
// allowed (FlagNamed).
func newDecFlags(h Header, body []byte, want Op, lim Limits, allowed uint8) (dec, error) {
	d := dec{b: body, op: want, lim: lim.withDefaults()}
	switch {
	case h.Op != want:
		return dec{}, fmt.Errorf("masterproto: decode %v: frame is %v: %w", want, h.Op, frame.ErrUnknownOp)
	case h.Flags&^allowed != 0:
		return dec{}, fmt.Errorf("masterproto: %v frame (request %d): flags 0x%02x, want 0: %w", h.Op, h.ReqID, h.Flags, frame.ErrMalformed)
	case h.Reserved != 0:
		return dec{}, fmt.Errorf("masterproto: %v frame (request %d): reserved header field %d, want 0: %w", h.Op, h.ReqID, h.Reserved, frame.ErrMalformed)
	case h.BodyLen() != len(body):
		return dec{}, fmt.Errorf("masterproto: %v frame (request %d): header says %d body bytes, got %d: %w", h.Op, h.ReqID, h.BodyLen(), len(body), frame.ErrMalformed)
	}
	return d, nil
}

// ---- HELLO ----

// Hello opens a connection (client to server).
type Hello struct {
	// Version is the protocol version the client speaks; 0 means Version.
	Version uint16
	// Token is the auth token (may be empty).
	Token []byte
	// ClusterID is the cluster the client is for ("" for none; see
	// meta.CheckClusterID). A node started for a cluster sends it, and
	// the master refuses a HELLO whose ID is not its own. It travels in
	// an optional trailer after the token, absent when empty, so a HELLO
	// without one is the version 1 encoding unchanged.
	ClusterID string
	// Follows says the client follows a cluster's leader among several
	// masters (it was given a list of masters or etcd): the HELLO carries
	// the term trailer, with Epoch, and the master answers with its own
	// (HelloReply's Epoch, Margin and Leader). A HELLO without it keeps
	// its earlier encoding.
	Follows bool
	// Epoch is the highest leader epoch the client has seen (0: none). A
	// master leading an older term refuses the HELLO with CodeNotLeader.
	Epoch uint64
}

// AppendHello appends a HELLO frame.
func AppendHello(dst []byte, reqID uint64, h *Hello) ([]byte, error) {
	dst, start := begin(dst, OpHello, reqID)
	if len(h.Token) > MaxTokenLen {
		return encodeError(dst, start, OpHello, fmt.Errorf("token of %d bytes, limit %d: %w", len(h.Token), MaxTokenLen, frame.ErrTooLong))
	}
	v := h.Version
	if v == 0 {
		v = Version
	}
	dst = frame.AppendMagic(dst, Magic, v)
	dst = le.AppendUint16(dst, uint16(len(h.Token)))
	dst = le.AppendUint32(dst, 0)
	dst = append(dst, h.Token...)
	dst, err := appendClusterID(dst, h.ClusterID)
	if err != nil {
		return encodeError(dst, start, OpHello, err)
	}
	if h.Follows {
		dst = append(dst, termTag)
		dst = le.AppendUint64(dst, h.Epoch)
	} else if h.Epoch != 0 {
		return encodeError(dst, start, OpHello, fmt.Errorf("epoch %d without Follows: %w", h.Epoch, meta.ErrBadRequest))
	}
	return finish(dst, start, OpHello)
}

// DecodeHello decodes a HELLO body into dst (Token aliases body). A body
// without the magic is frame.ErrBadMagic; a token over lim.MaxToken is
// frame.ErrTooLong.
func DecodeHello(h Header, body []byte, lim Limits, dst *Hello) error {
	d, err := newDec(h, body, OpHello, lim)
	if err != nil {
		return err
	}
	if d.need(helloLen, "hello") {
		if err := frame.CheckMagic(body, Magic); err != nil {
			return fmt.Errorf("masterproto: HELLO body: %w", err)
		}
	}
	d.off = min(4, len(body))
	dst.Version = d.u16("version")
	if d.err == nil && dst.Version == 0 {
		d.fail(frame.ErrMalformed, "version 0 (versions start at 1)")
	}
	n := int(d.u16("token length"))
	if v := d.u32("reserved"); v != 0 {
		d.fail(frame.ErrMalformed, "reserved field is %d, want 0", v)
	}
	if d.err == nil && n > d.lim.MaxToken {
		d.fail(frame.ErrTooLong, "token of %d bytes, limit %d", n, d.lim.MaxToken)
	}
	dst.Token = nil
	if d.need(n, "token") && n > 0 {
		dst.Token = body[d.off : d.off+n]
		d.off += n
	}
	dst.ClusterID = d.clusterID()
	dst.Follows, dst.Epoch = false, 0
	if d.term() {
		dst.Follows = true
		dst.Epoch = d.u64("epoch")
	}
	return d.end()
}

// HelloReply answers a HELLO. On CodeOK it carries the server's limits; on
// any other code the server closes the connection after it.
type HelloReply struct {
	// Version is the version the server speaks; 0 means Version.
	Version uint16
	// Code is CodeOK when the connection is accepted.
	Code Code
	// Message explains a refusal (at most MaxMessageLen bytes).
	Message string
	// MaxFrame, MaxBatch and MaxItems are the server's Limits.
	MaxFrame, MaxBatch, MaxItems uint32
	// ClusterID is the master's cluster ID, in the same optional trailer
	// as Hello's. A master sends it when it accepts a HELLO that carried
	// one (so a client that sends none gets the version 1 reply
	// unchanged); a client that sent one refuses a reply without it or
	// with another.
	ClusterID string
	// Term is set (the term trailer is sent) when the HELLO carried
	// Follows: Epoch is the term the master leads (0 for a master without
	// an election; in a refusal, the leader's as far as it knows), Margin
	// how long after a client sent a request an order in its answer may
	// still be trusted (0: no limit), Leader the control address of the
	// master that leads, as far as this one knows ("" when none leads),
	// so a client that reached a standby can go there.
	Term   bool
	Epoch  uint64
	Margin time.Duration
	Leader string
}

// termTag starts the term trailer of both HELLO bodies. No cluster ID
// trailer starts with it (an ID's length byte is at most 64), so the two
// optional trailers decode without ambiguity.
const termTag = 0xFE

// maxMarginMs bounds HelloReply.Margin on the wire: an hour, far above any
// lease (the margin is a tenth of the leader's lease TTL).
const maxMarginMs = 3600 * 1000

// Err returns nil for an accepted connection in this Version, a
// *RemoteError for a refusal, and an error wrapping frame.ErrVersion when the
// server accepted a version this side does not speak.
func (r *HelloReply) Err() error {
	return frame.HelloErr(r.Code, CodeOK, CodeVersionMismatch, r.Version, Version, r.Message, "masterproto: hello")
}

// HelloReplyFor returns the reply a server sends after a HELLO with result
// err, advertising lim.
func HelloReplyFor(err error, lim Limits) HelloReply {
	lim = lim.withDefaults()
	if err != nil {
		c := CodeOf(err)
		if c == CodeOK {
			c = CodeInternal
		}
		return HelloReply{Version: Version, Code: c, Message: frame.TruncateMessage(err.Error())}
	}
	return HelloReply{Version: Version, MaxFrame: uint32(lim.MaxFrame), MaxBatch: uint32(lim.MaxBatch), MaxItems: uint32(lim.MaxItems)}
}

// AppendHelloReply appends a HELLO response; a long message is truncated.
func AppendHelloReply(dst []byte, reqID uint64, r *HelloReply) ([]byte, error) {
	dst, start := begin(dst, OpHelloResponse, reqID)
	v := r.Version
	if v == 0 {
		v = Version
	}
	msg := frame.TruncateMessage(r.Message)
	dst = frame.AppendMagic(dst, Magic, v)
	dst = le.AppendUint16(dst, uint16(r.Code))
	dst = le.AppendUint32(dst, r.MaxFrame)
	dst = le.AppendUint32(dst, r.MaxBatch)
	dst = le.AppendUint32(dst, r.MaxItems)
	dst = le.AppendUint16(dst, uint16(len(msg)))
	dst = le.AppendUint16(dst, 0)
	dst = append(dst, msg...)
	dst, err := appendClusterID(dst, r.ClusterID)
	if err != nil {
		return encodeError(dst, start, OpHelloResponse, err)
	}
	if r.Term {
		ms := r.Margin.Milliseconds()
		switch {
		case r.Margin < 0 || ms > maxMarginMs || r.Margin%time.Millisecond != 0:
			return encodeError(dst, start, OpHelloResponse, fmt.Errorf("margin %v: want whole milliseconds up to 1h: %w", r.Margin, meta.ErrBadRequest))
		case len(r.Leader) > MaxAddrLen:
			return encodeError(dst, start, OpHelloResponse, fmt.Errorf("leader address of %d bytes, limit %d: %w", len(r.Leader), MaxAddrLen, frame.ErrTooLong))
		}
		dst = append(dst, termTag)
		dst = le.AppendUint64(dst, r.Epoch)
		dst = le.AppendUint32(dst, uint32(ms))
		dst = appendStr8(dst, r.Leader)
	} else if r.Epoch != 0 || r.Margin != 0 || r.Leader != "" {
		return encodeError(dst, start, OpHelloResponse, fmt.Errorf("epoch, margin or leader without Term: %w", meta.ErrBadRequest))
	}
	return finish(dst, start, OpHelloResponse)
}

// DecodeHelloReply decodes a HELLO response body into dst.
func DecodeHelloReply(h Header, body []byte, lim Limits, dst *HelloReply) error {
	d, err := newDec(h, body, OpHelloResponse, lim)
	if err != nil {
		return err
	}
	if d.need(helloReplyLen, "hello response") {
		if err := frame.CheckMagic(body, Magic); err != nil {
			return fmt.Errorf("masterproto: HELLO response body: %w", err)
		}
	}
	d.off = min(4, len(body))
	dst.Version = d.u16("version")
	if d.err == nil && dst.Version == 0 {
		d.fail(frame.ErrMalformed, "version 0 (versions start at 1)")
	}
	dst.Code = Code(d.u16("code"))
	dst.MaxFrame = d.u32("max frame")
	dst.MaxBatch = d.u32("max batch")
	dst.MaxItems = d.u32("max items")
	n := int(d.u16("message length"))
	d.zero16("field")
	if d.err == nil && n > MaxMessageLen {
		d.fail(frame.ErrTooLong, "message of %d bytes, limit %d", n, MaxMessageLen)
	}
	if d.need(n, "message") {
		dst.Message = string(body[d.off : d.off+n])
		d.off += n
	}
	dst.ClusterID = d.clusterID()
	dst.Term, dst.Epoch, dst.Margin, dst.Leader = false, 0, 0, ""
	if d.term() {
		dst.Term = true
		dst.Epoch = d.u64("epoch")
		ms := d.u32("margin")
		if d.err == nil && ms > maxMarginMs {
			d.fail(frame.ErrMalformed, "margin of %d ms, limit %d", ms, maxMarginMs)
		}
		dst.Margin = time.Duration(ms) * time.Millisecond
		dst.Leader = d.str8("leader address", MaxAddrLen)
	}
	return d.end()
}

// term reports whether the term trailer starts here, and consumes its
// tag.
func (d *dec) term() bool {
	if d.err != nil || d.off == len(d.b) || d.b[d.off] != termTag {
		return false
	}
	d.off++
	return true
}

// appendClusterID appends the cluster ID trailer of a HELLO or HELLO
// response: nothing for an empty ID, else str8 id.
func appendClusterID(dst []byte, id string) ([]byte, error) {
	if err := meta.CheckClusterID(id); err != nil {
		return dst, fmt.Errorf("%v: %w", err, meta.ErrBadRequest)
	}
	if id == "" {
		return dst, nil
	}
	return appendStr8(dst, id), nil
}

// clusterID reads the optional cluster ID trailer: "" when the body ends
// here. A present trailer holds a non-empty valid ID (an empty one is
// never encoded, so every HELLO keeps a single encoding).
func (d *dec) clusterID() string {
	if d.err != nil || d.off == len(d.b) || d.b[d.off] == termTag {
		return ""
	}
	id := d.str8("cluster ID", meta.MaxClusterIDLen)
	switch {
	case d.err != nil:
	case id == "":
		d.fail(frame.ErrMalformed, "empty cluster ID trailer (an empty ID is sent as none)")
	default:
		if err := meta.CheckClusterID(id); err != nil {
			d.fail(frame.ErrMalformed, "%v", err)
			return ""
		}
	}
	return id
}

// ---- ERROR ----

// AppendError appends an ERROR frame answering request reqID; code CodeOK
// is sent as CodeInternal, and a long message is truncated.
func AppendError(dst []byte, reqID uint64, code Code, msg string) []byte {
	if code == CodeOK {
		code = CodeInternal
	}
	msg = frame.TruncateMessage(msg)
	dst, start := begin(dst, OpError, reqID)
	dst = le.AppendUint16(dst, uint16(code))
	dst = le.AppendUint16(dst, uint16(len(msg)))
	dst = append(dst, msg...)
	dst, _ = finish(dst, start, OpError) // at most 16+4+1024 bytes
	return dst
}

// DecodeError decodes an ERROR body into a *RemoteError.
func DecodeError(h Header, body []byte) (*RemoteError, error) {
	lim := DefaultLimits()
	d, err := newDec(h, body, OpError, lim)
	if err != nil {
		return nil, err
	}
	code := Code(d.u16("code"))
	n := int(d.u16("message length"))
	switch {
	case d.err != nil:
	case code == CodeOK:
		d.fail(frame.ErrMalformed, "code is ok (an ERROR never is)")
	case n > MaxMessageLen:
		d.fail(frame.ErrTooLong, "message of %d bytes, limit %d", n, MaxMessageLen)
	}
	var msg string
	if d.need(n, "message") {
		msg = string(body[d.off : d.off+n])
		d.off += n
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return &RemoteError{Code: code, Message: msg}, nil
}

// ---- shared pieces ----

func appendNodeInfo(dst []byte, ni *meta.NodeInfo) ([]byte, error) {
	if err := checkNodeID("node", string(ni.ID)); err != nil {
		return dst, err
	}
	if err := checkAddr(string(ni.ID), ni.Addr); err != nil {
		return dst, err
	}
	dst = appendStr8(dst, string(ni.ID))
	dst = appendStr8(dst, ni.Addr)
	dst = le.AppendUint64(dst, uint64(ni.RAMBytes))
	dst = le.AppendUint64(dst, uint64(ni.SSDBytes))
	return le.AppendUint64(dst, uint64(ni.BlockSize)), nil
}

func (d *dec) nodeInfo(ni *meta.NodeInfo) {
	ni.ID = meta.NodeID(d.str8("node ID", MaxNodeIDLen))
	ni.Addr = d.str8("address", MaxAddrLen)
	ni.RAMBytes = d.nonNeg("RAM bytes")
	ni.SSDBytes = d.nonNeg("SSD bytes")
	ni.BlockSize = d.nonNeg("block size")
}

func appendUsage(dst []byte, u meta.NodeUsage) []byte {
	dst = le.AppendUint64(dst, uint64(u.RAMUsed))
	return le.AppendUint64(dst, uint64(u.SSDUsed))
}

func (d *dec) usage() meta.NodeUsage {
	return meta.NodeUsage{RAMUsed: d.nonNeg("RAM used"), SSDUsed: d.nonNeg("SSD used")}
}

func validTier(t meta.Tier) bool { return t == meta.TierRAM || t == meta.TierSSD }

func checkItem(what string, i int, it *meta.Item) error {
	if !validTier(it.Tier) {
		return fmt.Errorf("%s[%d]: key %v: %v is not a tier: %w", what, i, it.Key, it.Tier, meta.ErrBadRequest)
	}
	if it.Size < 0 {
		return fmt.Errorf("%s[%d]: key %v: negative size %d: %w", what, i, it.Key, it.Size, meta.ErrBadRequest)
	}
	return nil
}

func appendItems(dst []byte, te *tenantEnc, items []meta.Item) []byte {
	dst = le.AppendUint32(dst, uint32(len(items)))
	for i := range items {
		it := &items[i]
		dst = le.AppendUint16(dst, te.ref(it.Key))
		dst = append(dst, byte(it.Tier), 0)
		dst = le.AppendUint32(dst, it.Sum)
		dst = le.AppendUint64(dst, it.Key.ID)
		dst = le.AppendUint64(dst, uint64(it.Size))
		dst = appendName(dst, it.Key)
	}
	return dst
}

func (d *dec) tier(what string) meta.Tier {
	t := meta.Tier(d.u8(what))
	if d.err == nil && !validTier(t) {
		d.fail(frame.ErrMalformed, "%s %d is not a tier (want 1 ram or 2 ssd)", what, uint8(t))
	}
	return t
}

// keyRef reads the tenant reference of an entry's key: the tenant, and
// whether the key is named (its name follows the entry's fixed part).
func (d *dec) keyRef(tenants []string, r *refs) (string, bool) {
	v := d.u16("tenant index")
	i := r.use(d, "tenant", int(v&^namedRef))
	if d.err != nil {
		return "", false
	}
	return tenants[i], v&namedRef != 0
}

func (d *dec) items(what string, tenants []string, r *refs) []meta.Item {
	n := d.count(what, d.lim.MaxItems, itemLen)
	if d.err != nil || n == 0 {
		return nil
	}
	out := make([]meta.Item, n)
	for i := range out {
		it := &out[i]
		var named bool
		it.Key.Tenant, named = d.keyRef(tenants, r)
		it.Tier = d.tier("tier")
		d.zero8("byte")
		it.Sum = d.u32("checksum")
		it.Key.ID = d.u64("id")
		it.Size = d.nonNeg("size")
		it.Key.Name = d.name(named)
		if d.err != nil {
			return nil
		}
	}
	return out
}

// ---- REGISTER ----

// Register is a REGISTER request: a node's identity, usage and full
// inventory.
type Register struct {
	Info      meta.NodeInfo
	Usage     meta.NodeUsage
	Inventory meta.Inventory
}

// AppendRegister appends a REGISTER frame.
func AppendRegister(dst []byte, reqID uint64, r *Register) ([]byte, error) {
	dst, start := begin(dst, OpRegister, reqID)
	var te tenantEnc
	for i := range r.Inventory {
		if err := checkItem("inventory", i, &r.Inventory[i]); err != nil {
			return encodeError(dst, start, OpRegister, err)
		}
		te.add(fmt.Sprintf("inventory[%d]", i), r.Inventory[i].Key)
	}
	if te.err != nil {
		return encodeError(dst, start, OpRegister, te.err)
	}
	dst, err := appendNodeInfo(dst, &r.Info)
	if err != nil {
		return encodeError(dst, start, OpRegister, err)
	}
	dst = appendUsage(dst, r.Usage)
	dst = te.appendTable(dst)
	dst = appendItems(dst, &te, r.Inventory)
	if r.Usage.Backlog {
		dst[start+5] = FlagBacklog
	}
	return finish(dst, start, OpRegister)
}

// DecodeRegister decodes a REGISTER body into dst.
func DecodeRegister(h Header, body []byte, lim Limits, dst *Register) error {
	d, err := newDecFlags(h, body, OpRegister, lim, FlagBacklog)
	if err != nil {
		return err
	}
	d.nodeInfo(&dst.Info)
	dst.Usage = d.usage()
	dst.Usage.Backlog = h.Flags&FlagBacklog != 0
	tenants, r := d.tenantTable()
	dst.Inventory = d.items("inventory", tenants, &r)
	r.done(&d, "tenant")
	return d.end()
}

// AppendRegisterReply appends a REGISTER response.
func AppendRegisterReply(dst []byte, reqID uint64, r *meta.RegisterReply) ([]byte, error) {
	dst, start := begin(dst, OpRegisterResponse, reqID)
	if r.HeartbeatInterval < 0 || r.NodeTTL < 0 {
		return encodeError(dst, start, OpRegisterResponse, fmt.Errorf("negative duration in %+v: %w", *r, meta.ErrBadRequest))
	}
	dst = le.AppendUint64(dst, uint64(r.Session))
	dst = le.AppendUint64(dst, uint64(r.HeartbeatInterval))
	dst = le.AppendUint64(dst, uint64(r.NodeTTL))
	return finish(dst, start, OpRegisterResponse)
}

// DecodeRegisterReply decodes a REGISTER response body into dst.
func DecodeRegisterReply(h Header, body []byte, dst *meta.RegisterReply) error {
	lim := DefaultLimits()
	d, err := newDec(h, body, OpRegisterResponse, lim)
	if err != nil {
		return err
	}
	dst.Session = meta.Session(d.u64("session"))
	dst.HeartbeatInterval = time.Duration(d.nonNeg("heartbeat interval"))
	dst.NodeTTL = time.Duration(d.nonNeg("node TTL"))
	return d.end()
}

// ---- HEARTBEAT ----

// Heartbeat is a HEARTBEAT request (see master.Master.Heartbeat).
type Heartbeat struct {
	Node    meta.NodeID
	Session meta.Session
	Usage   meta.NodeUsage
	Delta   meta.Delta
	SSDHits []block.Key
	Done    []meta.TaskResult
}

// AppendHeartbeat appends a HEARTBEAT frame.
func AppendHeartbeat(dst []byte, reqID uint64, hb *Heartbeat) ([]byte, error) {
	dst, start := begin(dst, OpHeartbeat, reqID)
	if err := checkNodeID("heartbeat", string(hb.Node)); err != nil {
		return encodeError(dst, start, OpHeartbeat, err)
	}
	var te tenantEnc
	for i := range hb.Delta.Added {
		if err := checkItem("delta.Added", i, &hb.Delta.Added[i]); err != nil {
			return encodeError(dst, start, OpHeartbeat, err)
		}
		te.add(fmt.Sprintf("delta.Added[%d]", i), hb.Delta.Added[i].Key)
	}
	for i, ik := range hb.Delta.Removed {
		if !validTier(ik.Tier) {
			return encodeError(dst, start, OpHeartbeat, fmt.Errorf("delta.Removed[%d]: %v is not a tier: %w", i, ik.Tier, meta.ErrBadRequest))
		}
		te.add(fmt.Sprintf("delta.Removed[%d]", i), ik.Key)
	}
	for i, mv := range hb.Delta.Moved {
		if !validTier(mv.From) || !validTier(mv.To) {
			return encodeError(dst, start, OpHeartbeat, fmt.Errorf("delta.Moved[%d]: %v→%v is not a pair of tiers: %w", i, mv.From, mv.To, meta.ErrBadRequest))
		}
		te.add(fmt.Sprintf("delta.Moved[%d]", i), mv.Key)
	}
	for i, k := range hb.SSDHits {
		te.add(fmt.Sprintf("ssdHits[%d]", i), k)
	}
	for i, r := range hb.Done {
		if r.Bytes < 0 {
			return encodeError(dst, start, OpHeartbeat, fmt.Errorf("done[%d]: negative bytes %d: %w", i, r.Bytes, meta.ErrBadRequest))
		}
	}
	if te.err != nil {
		return encodeError(dst, start, OpHeartbeat, te.err)
	}
	dst = appendStr8(dst, string(hb.Node))
	dst = le.AppendUint64(dst, uint64(hb.Session))
	dst = appendUsage(dst, hb.Usage)
	dst = te.appendTable(dst)
	dst = appendItems(dst, &te, hb.Delta.Added)
	dst = le.AppendUint32(dst, uint32(len(hb.Delta.Removed)))
	for _, ik := range hb.Delta.Removed {
		dst = le.AppendUint16(dst, te.ref(ik.Key))
		dst = append(dst, byte(ik.Tier), 0)
		dst = le.AppendUint64(dst, ik.Key.ID)
		dst = appendName(dst, ik.Key)
	}
	dst = le.AppendUint32(dst, uint32(len(hb.Delta.Moved)))
	for _, mv := range hb.Delta.Moved {
		dst = le.AppendUint16(dst, te.ref(mv.Key))
		dst = append(dst, byte(mv.From), byte(mv.To))
		dst = le.AppendUint64(dst, mv.Key.ID)
		dst = appendName(dst, mv.Key)
	}
	dst = le.AppendUint32(dst, uint32(len(hb.SSDHits)))
	for _, k := range hb.SSDHits {
		dst = le.AppendUint16(dst, te.ref(k))
		dst = le.AppendUint64(dst, k.ID)
		dst = appendName(dst, k)
	}
	dst = le.AppendUint32(dst, uint32(len(hb.Done)))
	for _, r := range hb.Done {
		dst = le.AppendUint64(dst, r.ID)
		dst = le.AppendUint64(dst, uint64(r.Bytes))
		dst = appendBool(dst, r.OK)
	}
	if hb.Usage.Backlog {
		dst[start+5] = FlagBacklog
	}
	return finish(dst, start, OpHeartbeat)
}

// DecodeHeartbeat decodes a HEARTBEAT body into dst.
func DecodeHeartbeat(h Header, body []byte, lim Limits, dst *Heartbeat) error {
	d, err := newDecFlags(h, body, OpHeartbeat, lim, FlagBacklog)
	if err != nil {
		return err
	}
	*dst = Heartbeat{}
	dst.Node = meta.NodeID(d.str8("node ID", MaxNodeIDLen))
	dst.Session = meta.Session(d.u64("session"))
	dst.Usage = d.usage()
	dst.Usage.Backlog = h.Flags&FlagBacklog != 0
	tenants, r := d.tenantTable()
	dst.Delta.Added = d.items("delta.Added", tenants, &r)
	if n := d.count("delta.Removed", d.lim.MaxItems, itemKeyLen); n > 0 {
		dst.Delta.Removed = make([]meta.ItemKey, n)
		for i := range dst.Delta.Removed {
			ik := &dst.Delta.Removed[i]
			var named bool
			ik.Key.Tenant, named = d.keyRef(tenants, &r)
			ik.Tier = d.tier("tier")
			d.zero8("byte")
			ik.Key.ID = d.u64("id")
			ik.Key.Name = d.name(named)
		}
	}
	if n := d.count("delta.Moved", d.lim.MaxItems, moveLen); n > 0 {
		dst.Delta.Moved = make([]meta.Move, n)
		for i := range dst.Delta.Moved {
			mv := &dst.Delta.Moved[i]
			var named bool
			mv.Key.Tenant, named = d.keyRef(tenants, &r)
			mv.From = d.tier("from tier")
			mv.To = d.tier("to tier")
			mv.Key.ID = d.u64("id")
			mv.Key.Name = d.name(named)
		}
	}
	if n := d.count("ssdHits", d.lim.MaxItems, hitLen); n > 0 {
		dst.SSDHits = make([]block.Key, n)
		for i := range dst.SSDHits {
			k := &dst.SSDHits[i]
			var named bool
			k.Tenant, named = d.keyRef(tenants, &r)
			k.ID = d.u64("id")
			k.Name = d.name(named)
		}
	}
	r.done(&d, "tenant")
	if n := d.count("done", d.lim.MaxItems, resultLen); n > 0 {
		dst.Done = make([]meta.TaskResult, n)
		for i := range dst.Done {
			tr := &dst.Done[i]
			tr.ID = d.u64("task ID")
			tr.Bytes = d.nonNeg("bytes")
			tr.OK = d.bool("ok")
		}
	}
	if err := d.end(); err != nil {
		*dst = Heartbeat{}
		return err
	}
	return nil
}

// AppendHeartbeatReply appends a HEARTBEAT response.
func AppendHeartbeatReply(dst []byte, reqID uint64, r *meta.HeartbeatReply) ([]byte, error) {
	dst, start := begin(dst, OpHeartbeatResponse, reqID)
	if r.HeartbeatInterval < 0 {
		return encodeError(dst, start, OpHeartbeatResponse, fmt.Errorf("negative heartbeat interval %v: %w", r.HeartbeatInterval, meta.ErrBadRequest))
	}
	var te tenantEnc
	for i, t := range r.Tasks {
		if t.Kind < meta.TaskDemote || t.Kind > meta.TaskPromote {
			return encodeError(dst, start, OpHeartbeatResponse, fmt.Errorf("tasks[%d]: unknown kind %v: %w", i, t.Kind, meta.ErrBadRequest))
		}
		te.add(fmt.Sprintf("tasks[%d]", i), t.Key)
	}
	if te.err != nil {
		return encodeError(dst, start, OpHeartbeatResponse, te.err)
	}
	dst = le.AppendUint64(dst, uint64(r.HeartbeatInterval))
	dst = te.appendTable(dst)
	dst = le.AppendUint32(dst, uint32(len(r.Tasks)))
	for _, t := range r.Tasks {
		dst = le.AppendUint64(dst, t.ID)
		dst = append(dst, byte(t.Kind), 0)
		dst = le.AppendUint16(dst, te.ref(t.Key))
		dst = le.AppendUint64(dst, t.Key.ID)
		dst = appendName(dst, t.Key)
	}
	return finish(dst, start, OpHeartbeatResponse)
}

// DecodeHeartbeatReply decodes a HEARTBEAT response body into dst.
func DecodeHeartbeatReply(h Header, body []byte, lim Limits, dst *meta.HeartbeatReply) error {
	d, err := newDec(h, body, OpHeartbeatResponse, lim)
	if err != nil {
		return err
	}
	*dst = meta.HeartbeatReply{HeartbeatInterval: time.Duration(d.nonNeg("heartbeat interval"))}
	tenants, r := d.tenantTable()
	if n := d.count("tasks", d.lim.MaxItems, taskLen); n > 0 {
		dst.Tasks = make([]meta.Task, n)
		for i := range dst.Tasks {
			t := &dst.Tasks[i]
			t.ID = d.u64("task ID")
			t.Kind = meta.TaskKind(d.u8("kind"))
			if d.err == nil && (t.Kind < meta.TaskDemote || t.Kind > meta.TaskPromote) {
				d.fail(frame.ErrMalformed, "task kind %d (want 1 demote, 2 drop or 3 promote)", uint8(t.Kind))
			}
			d.zero8("byte")
			var named bool
			t.Key.Tenant, named = d.keyRef(tenants, &r)
			t.Key.ID = d.u64("key id")
			t.Key.Name = d.name(named)
		}
	}
	r.done(&d, "tenant")
	if err := d.end(); err != nil {
		*dst = meta.HeartbeatReply{}
		return err
	}
	return nil
}

// ---- key batches: LOOKUP, EXISTS ----

func appendIDs(dst []byte, ids []uint64) []byte {
	dst = le.AppendUint32(dst, uint32(len(ids)))
	for _, id := range ids {
		dst = le.AppendUint64(dst, id)
	}
	return dst
}

// keysFlags returns the header flags of a key batch: FlagNamed when it
// has names. names is nil (chain keys) or one name per id, each 1 to
// block.MaxNameLen bytes.
func keysFlags(what string, ids []uint64, names []string) (uint8, error) {
	if names == nil {
		return 0, nil
	}
	if len(names) != len(ids) {
		return 0, fmt.Errorf("%s: %d names for %d ids: %w", what, len(names), len(ids), meta.ErrBadRequest)
	}
	for i, n := range names {
		switch {
		case n == "":
			return 0, fmt.Errorf("%s: key %d: empty name (a batch is all chain keys or all named): %w", what, i, meta.ErrBadRequest)
		case len(n) > block.MaxNameLen:
			return 0, fmt.Errorf("%s: key %d: name of %d bytes, limit %d: %w", what, i, len(n), block.MaxNameLen, frame.ErrTooLong)
		}
	}
	return FlagNamed, nil
}

// appendKeys appends a key batch: u32 n, n × id, each id followed by its
// name when names is not nil.
func appendKeys(dst []byte, ids []uint64, names []string) []byte {
	if names == nil {
		return appendIDs(dst, ids)
	}
	dst = le.AppendUint32(dst, uint32(len(ids)))
	for i, id := range ids {
		dst = le.AppendUint64(dst, id)
		dst = le.AppendUint16(dst, uint16(len(names[i])))
		dst = append(dst, names[i]...)
	}
	return dst
}

// keys reads a key batch into ids[:0] and, when named, names[:0] (nil
// otherwise), reusing a name string of the previous batch at the same
// position when equal.
func (d *dec) keys(named bool, ids []uint64, names []string) ([]uint64, []string) {
	if !named {
		return d.ids(ids), nil
	}
	ids = ids[:0]
	prev := names
	names = names[:0]
	n := d.count("keys", d.lim.MaxBatch, 8+2+1)
	for i := 0; i < n && d.err == nil; i++ {
		ids = append(ids, d.u64("id"))
		l := int(d.u16("name length"))
		switch {
		case d.err != nil:
		case l == 0:
			d.fail(frame.ErrMalformed, "key %d: empty name", i)
		case l > block.MaxNameLen:
			d.fail(frame.ErrTooLong, "key %d: name of %d bytes, limit %d", i, l, block.MaxNameLen)
		case d.need(l, "name"):
			b := d.b[d.off : d.off+l]
			d.off += l
			if i < len(prev) && prev[i] == string(b) {
				names = append(names, prev[i])
			} else {
				names = append(names, string(b))
			}
		}
	}
	if names == nil {
		names = []string{}
	}
	return ids, names
}

// ids appends a u32-counted list of ids to dst[:0].
func (d *dec) ids(dst []uint64) []uint64 {
	dst = dst[:0]
	n := d.count("keys", d.lim.MaxBatch, 8)
	if d.err != nil {
		return dst
	}
	for i := 0; i < n; i++ {
		dst = append(dst, le.Uint64(d.b[d.off:]))
		d.off += 8
	}
	return dst
}

// internTenant reads a tenant and returns cur when it is equal (so a
// decoder reused across requests of one tenant allocates nothing).
func (d *dec) internTenant(cur string) string {
	b := d.bytes8("tenant", block.MaxTenantLen)
	if d.err != nil {
		return ""
	}
	if string(b) == cur {
		return cur
	}
	s := string(b)
	if err := (block.Key{Tenant: s}).Validate(); err != nil {
		d.fail(frame.ErrMalformed, "tenant %q: %v", s, err)
		return ""
	}
	return s
}

func checkBatch(what, tenant string, n int) error {
	if err := checkTenant(what, tenant); err != nil {
		return err
	}
	if uint64(n) > 1<<32-1 {
		return fmt.Errorf("%s: %d keys, the count field allows %d: %w", what, n, uint32(1<<32-1), frame.ErrBatchTooLong)
	}
	return nil
}

// Lookup is a LOOKUP request (see master.Master.Lookup).
type Lookup struct {
	Tenant string
	IDs    []uint64
	// Lease asks for read leases (a Get is coming).
	Lease bool
}

// AppendLookup appends a LOOKUP frame.
func AppendLookup(dst []byte, reqID uint64, l *Lookup) ([]byte, error) {
	dst, start := begin(dst, OpLookup, reqID)
	if err := checkBatch("lookup", l.Tenant, len(l.IDs)); err != nil {
		return encodeError(dst, start, OpLookup, err)
	}
	dst = appendBool(dst, l.Lease)
	dst = appendStr8(dst, l.Tenant)
	dst = appendIDs(dst, l.IDs)
	return finish(dst, start, OpLookup)
}

// DecodeLookup decodes a LOOKUP body into dst, reusing dst.IDs and, when
// the tenant is unchanged, dst.Tenant: a server decoding into one Lookup
// per connection allocates nothing.
func DecodeLookup(h Header, body []byte, lim Limits, dst *Lookup) error {
	d, err := newDec(h, body, OpLookup, lim)
	if err != nil {
		return err
	}
	dst.Lease = d.bool("lease flag")
	dst.Tenant = d.internTenant(dst.Tenant)
	dst.IDs = d.ids(dst.IDs)
	return d.end()
}

// Replica is one copy of a block as a LOOKUP response gives it: the node,
// its data-plane address, and the copy's tier, size and checksum.
type Replica struct {
	Node meta.NodeID
	Addr string
	Tier meta.Tier
	Size int64
	Sum  uint32
}

// Target is a node and its data-plane address.
type Target struct {
	Node meta.NodeID
	Addr string
}

// LookupResult is a LOOKUP response: the prefix found and its replicas.
// Its slices are reused from call to call, and node IDs and addresses are
// interned across calls, so decoding into one LookupResult allocates
// nothing in steady state.
type LookupResult struct {
	// Hit is the length of the prefix found.
	Hit int
	// Replicas holds the replicas of the Hit prefix blocks, block after
	// block, in the master's order (RAM before SSD, then by node ID).
	Replicas []Replica
	// Ends[i] is where block i's replicas end in Replicas.
	Ends []int

	table, spare []Target // node table scratch (encode and decode)
}

// Block returns the replicas of prefix block i (0 <= i < Hit).
func (r *LookupResult) Block(i int) []Replica {
	start := 0
	if i > 0 {
		start = r.Ends[i-1]
	}
	return r.Replicas[start:r.Ends[i]]
}

// Reset empties r keeping its storage.
func (r *LookupResult) Reset() {
	r.Hit = 0
	r.Replicas = r.Replicas[:0]
	r.Ends = r.Ends[:0]
}

// targetIndex returns t's index in *table, appending it when new.
func targetIndex(table *[]Target, node meta.NodeID, addr string) (int, error) {
	for i := range *table {
		if e := &(*table)[i]; e.Node == node && e.Addr == addr {
			return i, nil
		}
	}
	if len(*table) == MaxTableLen {
		return 0, fmt.Errorf("more than %d nodes in one frame: %w", MaxTableLen, frame.ErrBatchTooLong)
	}
	if err := checkNodeID("replica", string(node)); err != nil {
		return 0, err
	}
	if err := checkAddr(string(node), addr); err != nil {
		return 0, err
	}
	*table = append(*table, Target{node, addr})
	return len(*table) - 1, nil
}

func appendTargetTable(dst []byte, table []Target) []byte {
	dst = le.AppendUint16(dst, uint16(len(table)))
	for _, t := range table {
		dst = appendStr8(dst, string(t.Node))
		dst = appendStr8(dst, t.Addr)
	}
	return dst
}

// targetTable decodes a node table into (*cur)[:0], reusing the strings of
// prev where an entry repeats one of it. Entries must be distinct.
func (d *dec) targetTable(cur *[]Target, prev []Target) refs {
	n := d.count16("node table", targetMinLen)
	t := (*cur)[:0]
	var seen map[Target]struct{}
	if n > 16 {
		seen = make(map[Target]struct{}, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		idb := d.bytes8("node ID", MaxNodeIDLen)
		ab := d.bytes8("address", MaxAddrLen)
		if d.err != nil {
			break
		}
		var e Target
		found := false
		for j := range prev {
			if p := &prev[j]; string(p.Node) == string(idb) && p.Addr == string(ab) {
				e, found = *p, true
				break
			}
		}
		if !found {
			e = Target{meta.NodeID(idb), string(ab)}
		}
		dup := false
		if seen != nil {
			_, dup = seen[e]
			seen[e] = struct{}{}
		} else {
			for j := range t {
				dup = dup || t[j] == e
			}
		}
		if dup {
			d.fail(frame.ErrMalformed, "node table entry %d (%q at %q) listed twice", i, e.Node, e.Addr)
			break
		}
		t = append(t, e)
	}
	*cur = t
	return refs{n: len(t)}
}

// AppendLookupResult appends a LOOKUP response for r (r's Replicas, Ends
// and Hit must agree; r's node table scratch is used).
func AppendLookupResult(dst []byte, reqID uint64, r *LookupResult) ([]byte, error) {
	return appendReplicaBlocks(dst, OpLookupResponse, reqID, r, false)
}

// appendReplicaBlocks appends a LOOKUP or LOCATE response (op); empty
// blocks are allowed in a LOCATE response only.
func appendReplicaBlocks(dst []byte, op Op, reqID uint64, r *LookupResult, empty bool) ([]byte, error) {
	dst, start := begin(dst, op, reqID)
	if r.Hit < 0 || r.Hit != len(r.Ends) || (r.Hit > 0 && r.Ends[r.Hit-1] != len(r.Replicas)) || (r.Hit == 0 && len(r.Replicas) > 0) {
		return encodeError(dst, start, op, fmt.Errorf("hit %d, %d ends, %d replicas disagree: %w", r.Hit, len(r.Ends), len(r.Replicas), meta.ErrBadRequest))
	}
	r.table = r.table[:0]
	for i := range r.Replicas {
		rep := &r.Replicas[i]
		if _, err := targetIndex(&r.table, rep.Node, rep.Addr); err != nil {
			return encodeError(dst, start, op, err)
		}
		if !validTier(rep.Tier) || rep.Size < 0 {
			return encodeError(dst, start, op, fmt.Errorf("replica %d: tier %v, size %d: %w", i, rep.Tier, rep.Size, meta.ErrBadRequest))
		}
	}
	dst = le.AppendUint32(dst, uint32(r.Hit))
	dst = appendTargetTable(dst, r.table)
	prev := 0
	for _, end := range r.Ends {
		n := end - prev
		if (n == 0 && !empty) || n < 0 || n > MaxTableLen {
			return encodeError(dst, start, op, fmt.Errorf("a block with %d replicas (want 1 to %d): %w", n, MaxTableLen, meta.ErrBadRequest))
		}
		dst = le.AppendUint16(dst, uint16(n))
		for i := prev; i < end; i++ {
			rep := &r.Replicas[i]
			idx, _ := targetIndex(&r.table, rep.Node, rep.Addr)
			dst = le.AppendUint16(dst, uint16(idx))
			dst = append(dst, byte(rep.Tier), 0)
			dst = le.AppendUint32(dst, rep.Sum)
			dst = le.AppendUint64(dst, uint64(rep.Size))
		}
		prev = end
	}
	return finish(dst, start, op)
}

// DecodeLookupResult decodes a LOOKUP response body into dst, reusing its
// storage and interning node IDs and addresses across calls.
func DecodeLookupResult(h Header, body []byte, lim Limits, dst *LookupResult) error {
	return decodeReplicaBlocks(h, body, lim, OpLookupResponse, dst, false)
}

// decodeReplicaBlocks decodes a LOOKUP or LOCATE response (op); empty
// blocks are allowed in a LOCATE response only.
func decodeReplicaBlocks(h Header, body []byte, lim Limits, op Op, dst *LookupResult, empty bool) error {
	dst.Reset()
	d, err := newDec(h, body, op, lim)
	if err != nil {
		return err
	}
	minBlock := 2 + replicaLen
	if empty {
		minBlock = 2
	}
	hit := d.count("hit blocks", d.lim.MaxBatch, minBlock)
	dst.table, dst.spare = dst.spare, dst.table
	r := d.targetTable(&dst.table, dst.spare)
	for b := 0; b < hit && d.err == nil; b++ {
		n := int(d.u16("replica count"))
		if d.err == nil && n == 0 && !empty {
			d.fail(frame.ErrMalformed, "block %d of the prefix has no replica", b)
		}
		if !d.need(n*replicaLen, "replicas") {
			break
		}
		for range n {
			i := r.use(&d, "node", int(d.u16("node index")))
			tier := d.tier("tier")
			d.zero8("byte")
			sum := d.u32("checksum")
			size := d.nonNeg("size")
			if d.err != nil {
				break
			}
			t := &dst.table[i]
			dst.Replicas = append(dst.Replicas, Replica{Node: t.Node, Addr: t.Addr, Tier: tier, Size: size, Sum: sum})
		}
		dst.Ends = append(dst.Ends, len(dst.Replicas))
	}
	r.done(&d, "node")
	if err := d.end(); err != nil {
		dst.Reset()
		return err
	}
	dst.Hit = hit
	return nil
}

// ---- LOCATE ----

// Locate is a LOCATE request (see master.Master.Locate): point lookups,
// each key on its own.
type Locate struct {
	Tenant string
	IDs    []uint64
	// Names is nil for chain keys, or the name of each key.
	Names []string
	// Lease asks for read leases (a Get is coming).
	Lease bool
}

// Keys returns the request's keys, appended to dst[:0].
func (l *Locate) Keys(dst []block.Key) []block.Key { return keysOf(dst, l.Tenant, l.IDs, l.Names) }

// AppendLocate appends a LOCATE frame.
func AppendLocate(dst []byte, reqID uint64, l *Locate) ([]byte, error) {
	dst, start := begin(dst, OpLocate, reqID)
	if err := checkBatch("locate", l.Tenant, len(l.IDs)); err != nil {
		return encodeError(dst, start, OpLocate, err)
	}
	flags, err := keysFlags("locate", l.IDs, l.Names)
	if err != nil {
		return encodeError(dst, start, OpLocate, err)
	}
	dst[start+5] = flags
	dst = appendBool(dst, l.Lease)
	dst = appendStr8(dst, l.Tenant)
	dst = appendKeys(dst, l.IDs, l.Names)
	return finish(dst, start, OpLocate)
}

// DecodeLocate decodes a LOCATE body into dst, reusing its storage.
func DecodeLocate(h Header, body []byte, lim Limits, dst *Locate) error {
	d, err := newDecFlags(h, body, OpLocate, lim, FlagNamed)
	if err != nil {
		return err
	}
	dst.Lease = d.bool("lease flag")
	dst.Tenant = d.internTenant(dst.Tenant)
	dst.IDs, dst.Names = d.keys(h.Flags&FlagNamed != 0, dst.IDs, dst.Names)
	return d.end()
}

// AppendLocateResult appends a LOCATE response for r: r.Hit is the number
// of keys asked, and a key without replicas has an empty block.
func AppendLocateResult(dst []byte, reqID uint64, r *LookupResult) ([]byte, error) {
	return appendReplicaBlocks(dst, OpLocateResponse, reqID, r, true)
}

// DecodeLocateResult decodes a LOCATE response body into dst (reused like
// DecodeLookupResult): dst.Hit keys, dst.Block(i) empty for an absent one.
func DecodeLocateResult(h Header, body []byte, lim Limits, dst *LookupResult) error {
	return decodeReplicaBlocks(h, body, lim, OpLocateResponse, dst, true)
}

// Exists is an EXISTS request (see master.Master.Exists and
// master.Master.ExistsKeys).
type Exists struct {
	Tenant string
	IDs    []uint64
	// Names is nil for chain keys, or the name of each key (IDs[i] is
	// its id, block.NameID(Names[i]) unless a test injects another).
	Names []string
}

// AppendExists appends an EXISTS frame.
func AppendExists(dst []byte, reqID uint64, e *Exists) ([]byte, error) {
	dst, start := begin(dst, OpExists, reqID)
	if err := checkBatch("exists", e.Tenant, len(e.IDs)); err != nil {
		return encodeError(dst, start, OpExists, err)
	}
	flags, err := keysFlags("exists", e.IDs, e.Names)
	if err != nil {
		return encodeError(dst, start, OpExists, err)
	}
	dst[start+5] = flags
	dst = appendStr8(dst, e.Tenant)
	dst = appendKeys(dst, e.IDs, e.Names)
	return finish(dst, start, OpExists)
}

// DecodeExists decodes an EXISTS body into dst (reused like DecodeLookup).
func DecodeExists(h Header, body []byte, lim Limits, dst *Exists) error {
	d, err := newDecFlags(h, body, OpExists, lim, FlagNamed)
	if err != nil {
		return err
	}
	dst.Tenant = d.internTenant(dst.Tenant)
	dst.IDs, dst.Names = d.keys(h.Flags&FlagNamed != 0, dst.IDs, dst.Names)
	return d.end()
}

// keysOf returns the keys of a key batch of tenant, appended to dst[:0].
func keysOf(dst []block.Key, tenant string, ids []uint64, names []string) []block.Key {
	dst = dst[:0]
	for i, id := range ids {
		k := block.Key{Tenant: tenant, ID: id}
		if names != nil {
			k.Name = names[i]
		}
		dst = append(dst, k)
	}
	return dst
}

// Keys returns the request's keys, appended to dst[:0].
func (e *Exists) Keys(dst []block.Key) []block.Key { return keysOf(dst, e.Tenant, e.IDs, e.Names) }

// AppendExistsResult appends an EXISTS response: one byte per key, 1
// present, 0 absent.
func AppendExistsResult(dst []byte, reqID uint64, present []bool) ([]byte, error) {
	return appendBools(dst, OpExistsResponse, reqID, present)
}

// appendBools appends an EXISTS or EXPIRE response (op): u32 n, n × u8.
func appendBools(dst []byte, op Op, reqID uint64, answers []bool) ([]byte, error) {
	dst, start := begin(dst, op, reqID)
	dst = le.AppendUint32(dst, uint32(len(answers)))
	for _, p := range answers {
		dst = appendBool(dst, p)
	}
	return finish(dst, start, op)
}

// DecodeExistsResult decodes an EXISTS response body, appending to dst[:0].
func DecodeExistsResult(h Header, body []byte, lim Limits, dst []bool) ([]bool, error) {
	return decodeBools(h, body, lim, OpExistsResponse, dst)
}

// decodeBools decodes an EXISTS or EXPIRE response (op), appending to
// dst[:0].
func decodeBools(h Header, body []byte, lim Limits, op Op, dst []bool) ([]bool, error) {
	dst = dst[:0]
	d, err := newDec(h, body, op, lim)
	if err != nil {
		return dst, err
	}
	n := d.count("answers", d.lim.MaxBatch, 1)
	for i := 0; i < n && d.err == nil; i++ {
		dst = append(dst, d.bool("answer"))
	}
	if err := d.end(); err != nil {
		return dst[:0], err
	}
	return dst, nil
}

// ---- PLACE ----

// Place is a PLACE request (see master.Master.PlaceObjects).
type Place struct {
	Tenant string
	IDs    []uint64
	// Names is nil for chain keys, or the name of each key.
	Names []string
	// Sizes are the objects' payload lengths in bytes (nil: all 0, which
	// the master charges as one RAM chunk each).
	Sizes    []int64
	Replicas int
	Hint     meta.NodeID
	Strategy meta.Strategy
}

// Objects returns the request's objects, appended to dst[:0].
func (p *Place) Objects(dst []meta.Object) []meta.Object {
	dst = dst[:0]
	for i, id := range p.IDs {
		o := meta.Object{Key: block.Key{Tenant: p.Tenant, ID: id}}
		if p.Names != nil {
			o.Key.Name = p.Names[i]
		}
		if p.Sizes != nil {
			o.Size = p.Sizes[i]
		}
		dst = append(dst, o)
	}
	return dst
}

// AppendPlace appends a PLACE frame.
func AppendPlace(dst []byte, reqID uint64, p *Place) ([]byte, error) {
	dst, start := begin(dst, OpPlace, reqID)
	if err := checkBatch("place", p.Tenant, len(p.IDs)); err != nil {
		return encodeError(dst, start, OpPlace, err)
	}
	flags, err := keysFlags("place", p.IDs, p.Names)
	if err != nil {
		return encodeError(dst, start, OpPlace, err)
	}
	if p.Sizes != nil && len(p.Sizes) != len(p.IDs) {
		return encodeError(dst, start, OpPlace, fmt.Errorf("%d sizes for %d keys: %w", len(p.Sizes), len(p.IDs), meta.ErrBadRequest))
	}
	for i, sz := range p.Sizes {
		if sz < 0 || sz > meta.MaxItemSize {
			return encodeError(dst, start, OpPlace, fmt.Errorf("key %d: size %d (want 0 to %d): %w", i, sz, int64(meta.MaxItemSize), meta.ErrBadRequest))
		}
	}
	dst[start+5] = flags
	if err := checkNodeID("place hint", string(p.Hint)); err != nil {
		return encodeError(dst, start, OpPlace, err)
	}
	if p.Replicas < 0 || p.Replicas > 0xFFFF {
		return encodeError(dst, start, OpPlace, fmt.Errorf("%d replicas (the field holds 0 to 65535): %w", p.Replicas, meta.ErrBadRequest))
	}
	dst = appendStr8(dst, p.Tenant)
	dst = appendStr8(dst, string(p.Hint))
	dst = le.AppendUint16(dst, uint16(p.Replicas))
	dst = append(dst, byte(p.Strategy), 0)
	dst = appendKeys(dst, p.IDs, p.Names)
	for i := range p.IDs {
		var sz int64
		if p.Sizes != nil {
			sz = p.Sizes[i]
		}
		dst = le.AppendUint64(dst, uint64(sz))
	}
	return finish(dst, start, OpPlace)
}

// DecodePlace decodes a PLACE body into dst.
func DecodePlace(h Header, body []byte, lim Limits, dst *Place) error {
	d, err := newDecFlags(h, body, OpPlace, lim, FlagNamed)
	if err != nil {
		return err
	}
	dst.Tenant = d.internTenant(dst.Tenant)
	hint := d.bytes8("hint", MaxNodeIDLen)
	if string(hint) != string(dst.Hint) {
		dst.Hint = meta.NodeID(hint)
	}
	dst.Replicas = int(d.u16("replicas"))
	dst.Strategy = meta.Strategy(d.u8("strategy"))
	d.zero8("byte")
	dst.IDs, dst.Names = d.keys(h.Flags&FlagNamed != 0, dst.IDs, dst.Names)
	if d.need(8*len(dst.IDs), "sizes") {
		dst.Sizes = dst.Sizes[:0]
		for range dst.IDs {
			sz := d.nonNeg("size")
			if d.err == nil && sz > meta.MaxItemSize {
				d.fail(frame.ErrMalformed, "size %d, limit %d", sz, int64(meta.MaxItemSize))
			}
			dst.Sizes = append(dst.Sizes, sz)
		}
	}
	return d.end()
}

// Placement is a PLACE response: block i goes to
// Nodes[i*PerBlock:(i+1)*PerBlock], the first the preferred one.
type Placement struct {
	PerBlock int
	Degraded bool
	Nodes    []Target

	table, spare []Target
}

// Block returns the targets chosen for block i.
func (p *Placement) Block(i int) []Target { return p.Nodes[i*p.PerBlock : (i+1)*p.PerBlock] }

// AppendPlacement appends a PLACE response.
func AppendPlacement(dst []byte, reqID uint64, p *Placement) ([]byte, error) {
	dst, start := begin(dst, OpPlaceResponse, reqID)
	if p.PerBlock < 0 || p.PerBlock > 0xFFFF || (p.PerBlock == 0 && len(p.Nodes) > 0) || (p.PerBlock > 0 && len(p.Nodes)%p.PerBlock != 0) {
		return encodeError(dst, start, OpPlaceResponse, fmt.Errorf("%d nodes for %d per block: %w", len(p.Nodes), p.PerBlock, meta.ErrBadRequest))
	}
	p.table = p.table[:0]
	for _, t := range p.Nodes {
		if _, err := targetIndex(&p.table, t.Node, t.Addr); err != nil {
			return encodeError(dst, start, OpPlaceResponse, err)
		}
	}
	dst = le.AppendUint16(dst, uint16(p.PerBlock))
	dst = appendBool(dst, p.Degraded)
	dst = append(dst, 0)
	dst = appendTargetTable(dst, p.table)
	dst = le.AppendUint32(dst, uint32(len(p.Nodes)))
	for _, t := range p.Nodes {
		idx, _ := targetIndex(&p.table, t.Node, t.Addr)
		dst = le.AppendUint16(dst, uint16(idx))
	}
	return finish(dst, start, OpPlaceResponse)
}

// DecodePlacement decodes a PLACE response body into dst.
func DecodePlacement(h Header, body []byte, lim Limits, dst *Placement) error {
	dst.PerBlock, dst.Degraded, dst.Nodes = 0, false, dst.Nodes[:0]
	d, err := newDec(h, body, OpPlaceResponse, lim)
	if err != nil {
		return err
	}
	per := int(d.u16("per block"))
	deg := d.bool("degraded")
	d.zero8("byte")
	dst.table, dst.spare = dst.spare, dst.table
	r := d.targetTable(&dst.table, dst.spare)
	n := d.count("choices", d.lim.MaxItems, 2)
	if d.err == nil && ((per == 0 && n > 0) || (per > 0 && n%per != 0)) {
		d.fail(frame.ErrMalformed, "%d choices are not whole blocks of %d", n, per)
	}
	for i := 0; i < n && d.err == nil; i++ {
		idx := r.use(&d, "node", int(d.u16("node index")))
		if d.err == nil {
			dst.Nodes = append(dst.Nodes, dst.table[idx])
		}
	}
	r.done(&d, "node")
	if err := d.end(); err != nil {
		dst.Nodes = dst.Nodes[:0]
		return err
	}
	dst.PerBlock, dst.Degraded = per, deg
	return nil
}

// ---- NODES ----

// AppendNodes appends a NODES request (empty body).
func AppendNodes(dst []byte, reqID uint64) []byte {
	dst, start := begin(dst, OpNodes, reqID)
	dst, _ = finish(dst, start, OpNodes)
	return dst
}

// DecodeNodes checks a NODES request.
func DecodeNodes(h Header, body []byte) error {
	lim := DefaultLimits()
	d, err := newDec(h, body, OpNodes, lim)
	if err != nil {
		return err
	}
	return d.end()
}

// AppendNodesResult appends a NODES response.
func AppendNodesResult(dst []byte, reqID uint64, nodes []meta.NodeStatus) ([]byte, error) {
	dst, start := begin(dst, OpNodesResponse, reqID)
	dst = le.AppendUint32(dst, uint32(len(nodes)))
	for i := range nodes {
		ns := &nodes[i]
		var err error
		if dst, err = appendNodeInfo(dst, &ns.Info); err != nil {
			return encodeError(dst, start, OpNodesResponse, err)
		}
		counts := [...]int{ns.RAMReplicas, ns.SSDReplicas, ns.Evicting, ns.PromotionsQueued, ns.TasksInFlight}
		for _, c := range counts {
			if c < 0 || c > 1<<32-1 {
				return encodeError(dst, start, OpNodesResponse, fmt.Errorf("node %q: count %d out of range: %w", ns.Info.ID, c, meta.ErrBadRequest))
			}
		}
		dst = le.AppendUint64(dst, uint64(ns.Session))
		dst = appendBool(dst, ns.Alive)
		dst = le.AppendUint64(dst, uint64(unixNano(ns.LastHeartbeat)))
		dst = le.AppendUint64(dst, uint64(ns.HeartbeatAge))
		dst = appendUsage(dst, ns.Reported)
		dst = appendUsage(dst, ns.Indexed)
		for _, c := range counts {
			dst = le.AppendUint32(dst, uint32(c))
		}
	}
	return finish(dst, start, OpNodesResponse)
}

// DecodeNodesResult decodes a NODES response body, appending to dst[:0].
func DecodeNodesResult(h Header, body []byte, lim Limits, dst []meta.NodeStatus) ([]meta.NodeStatus, error) {
	dst = dst[:0]
	d, err := newDec(h, body, OpNodesResponse, lim)
	if err != nil {
		return dst, err
	}
	n := d.count("nodes", d.lim.MaxItems, nodeStatusMin)
	for i := 0; i < n && d.err == nil; i++ {
		var ns meta.NodeStatus
		d.nodeInfo(&ns.Info)
		ns.Session = meta.Session(d.u64("session"))
		ns.Alive = d.bool("alive")
		ns.LastHeartbeat = fromUnixNano(d.signed("last heartbeat"))
		ns.HeartbeatAge = time.Duration(d.signed("heartbeat age"))
		ns.Reported = d.usage()
		ns.Indexed = d.usage()
		ns.RAMReplicas = int(d.u32("RAM replicas"))
		ns.SSDReplicas = int(d.u32("SSD replicas"))
		ns.Evicting = int(d.u32("evicting"))
		ns.PromotionsQueued = int(d.u32("promotions queued"))
		ns.TasksInFlight = int(d.u32("tasks in flight"))
		dst = append(dst, ns)
	}
	if err := d.end(); err != nil {
		return dst[:0], err
	}
	return dst, nil
}

// ---- QUERY ----

// AppendQuery appends a QUERY request for key k.
func AppendQuery(dst []byte, reqID uint64, k block.Key) ([]byte, error) {
	dst, start := begin(dst, OpQuery, reqID)
	if err := checkTenant("query", k.Tenant); err != nil {
		return encodeError(dst, start, OpQuery, err)
	}
	if err := checkName("query", k); err != nil {
		return encodeError(dst, start, OpQuery, err)
	}
	if k.Name != "" {
		dst[start+5] = FlagNamed
	}
	dst = appendStr8(dst, k.Tenant)
	dst = le.AppendUint64(dst, k.ID)
	dst = appendName(dst, k)
	return finish(dst, start, OpQuery)
}

// DecodeQuery decodes a QUERY request body.
func DecodeQuery(h Header, body []byte) (block.Key, error) {
	lim := DefaultLimits()
	d, err := newDecFlags(h, body, OpQuery, lim, FlagNamed)
	if err != nil {
		return block.Key{}, err
	}
	k := block.Key{Tenant: d.tenant("tenant")}
	k.ID = d.u64("id")
	k.Name = d.name(h.Flags&FlagNamed != 0)
	if err := d.end(); err != nil {
		return block.Key{}, err
	}
	return k, nil
}

// ReplicaStatus is one replica as a QUERY response shows it: the master's
// view plus the node's data-plane address ("" if the node is unknown).
type ReplicaStatus struct {
	meta.ReplicaStatus
	Addr string
}

// AppendQueryResult appends a QUERY response.
func AppendQueryResult(dst []byte, reqID uint64, reps []ReplicaStatus) ([]byte, error) {
	dst, start := begin(dst, OpQueryResponse, reqID)
	dst = le.AppendUint32(dst, uint32(len(reps)))
	for i := range reps {
		r := &reps[i]
		if err := checkNodeID("query", string(r.Node)); err != nil {
			return encodeError(dst, start, OpQueryResponse, err)
		}
		if err := checkAddr(string(r.Node), r.Addr); err != nil {
			return encodeError(dst, start, OpQueryResponse, err)
		}
		if !validTier(r.Tier) || r.Size < 0 {
			return encodeError(dst, start, OpQueryResponse, fmt.Errorf("replica %d: tier %v, size %d: %w", i, r.Tier, r.Size, meta.ErrBadRequest))
		}
		var flags byte
		if r.NodeAlive {
			flags |= 1
		}
		if r.Evicting {
			flags |= 2
		}
		dst = appendStr8(dst, string(r.Node))
		dst = appendStr8(dst, r.Addr)
		dst = append(dst, byte(r.Tier), flags)
		dst = le.AppendUint32(dst, r.Sum)
		dst = le.AppendUint64(dst, uint64(r.Size))
		dst = le.AppendUint64(dst, uint64(unixNano(r.LeaseUntil)))
	}
	return finish(dst, start, OpQueryResponse)
}

// DecodeQueryResult decodes a QUERY response body.
func DecodeQueryResult(h Header, body []byte, lim Limits) ([]ReplicaStatus, error) {
	d, err := newDec(h, body, OpQueryResponse, lim)
	if err != nil {
		return nil, err
	}
	n := d.count("replicas", d.lim.MaxItems, queryEntryMin)
	out := make([]ReplicaStatus, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		var r ReplicaStatus
		r.Node = meta.NodeID(d.str8("node ID", MaxNodeIDLen))
		r.Addr = d.str8("address", MaxAddrLen)
		r.Tier = d.tier("tier")
		flags := d.u8("flags")
		if d.err == nil && flags&^3 != 0 {
			d.fail(frame.ErrMalformed, "replica flags 0x%02x (defined: 0x01 alive, 0x02 evicting)", flags)
		}
		r.NodeAlive, r.Evicting = flags&1 != 0, flags&2 != 0
		r.Sum = d.u32("checksum")
		r.Size = d.nonNeg("size")
		r.LeaseUntil = fromUnixNano(d.signed("lease until"))
		out = append(out, r)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return out, nil
}

// ---- KEYINFO ----

// KeyInfo is a KEYINFO request (see master.Master.KeyInfo): the key query
// of named keys of one tenant.
type KeyInfo struct {
	Tenant string
	IDs    []uint64
	// Names is the name of each key (nil for chain keys, which the master
	// refuses: only named keys have Redis semantics).
	Names []string
}

// Keys returns the request's keys, appended to dst[:0].
func (k *KeyInfo) Keys(dst []block.Key) []block.Key { return keysOf(dst, k.Tenant, k.IDs, k.Names) }

// AppendKeyInfo appends a KEYINFO frame.
func AppendKeyInfo(dst []byte, reqID uint64, k *KeyInfo) ([]byte, error) {
	dst, start := begin(dst, OpKeyInfo, reqID)
	if err := checkBatch("key info", k.Tenant, len(k.IDs)); err != nil {
		return encodeError(dst, start, OpKeyInfo, err)
	}
	flags, err := keysFlags("key info", k.IDs, k.Names)
	if err != nil {
		return encodeError(dst, start, OpKeyInfo, err)
	}
	dst[start+5] = flags
	dst = appendStr8(dst, k.Tenant)
	dst = appendKeys(dst, k.IDs, k.Names)
	return finish(dst, start, OpKeyInfo)
}

// DecodeKeyInfo decodes a KEYINFO body into dst, reusing its storage.
func DecodeKeyInfo(h Header, body []byte, lim Limits, dst *KeyInfo) error {
	d, err := newDecFlags(h, body, OpKeyInfo, lim, FlagNamed)
	if err != nil {
		return err
	}
	dst.Tenant = d.internTenant(dst.Tenant)
	dst.IDs, dst.Names = d.keys(h.Flags&FlagNamed != 0, dst.IDs, dst.Names)
	return d.end()
}

// Key info flags of a KEYINFO response entry.
const (
	keyPresent = 0x01
	keyVisible = 0x02
)

// keyInfoMinLen is the size of a KEYINFO response entry without holders:
// flags u8, expire at i64, holder count u16.
const keyInfoMinLen = 1 + 8 + 2

// AppendKeyInfoResult appends a KEYINFO response: one entry per key asked,
// in order. Each entry's Holders must be distinct and sorted (as
// master.Master.KeyInfo gives them), a visible key present, an absent one
// without expiry or holders.
func AppendKeyInfoResult(dst []byte, reqID uint64, infos []meta.KeyInfo) ([]byte, error) {
	dst, start := begin(dst, OpKeyInfoResponse, reqID)
	var table []string
	index := func(id meta.NodeID) (int, error) {
		for i, t := range table {
			if t == string(id) {
				return i, nil
			}
		}
		if len(table) == MaxTableLen {
			return 0, fmt.Errorf("more than %d nodes in one frame: %w", MaxTableLen, frame.ErrBatchTooLong)
		}
		if err := checkNodeID("key info holder", string(id)); err != nil {
			return 0, err
		}
		table = append(table, string(id))
		return len(table) - 1, nil
	}
	for i := range infos {
		ki := &infos[i]
		switch {
		case ki.Visible && !ki.Present:
			return encodeError(dst, start, OpKeyInfoResponse, fmt.Errorf("key %d: visible but not present: %w", i, meta.ErrBadRequest))
		case !ki.Present && (ki.ExpireAt != 0 || len(ki.Holders) > 0):
			return encodeError(dst, start, OpKeyInfoResponse, fmt.Errorf("key %d: absent, with expiry %d and %d holders: %w", i, ki.ExpireAt, len(ki.Holders), meta.ErrBadRequest))
		case ki.ExpireAt < 0:
			return encodeError(dst, start, OpKeyInfoResponse, fmt.Errorf("key %d: expiry %d is negative: %w", i, ki.ExpireAt, meta.ErrBadRequest))
		case len(ki.Holders) > MaxTableLen:
			return encodeError(dst, start, OpKeyInfoResponse, fmt.Errorf("key %d: %d holders, limit %d: %w", i, len(ki.Holders), MaxTableLen, frame.ErrBatchTooLong))
		}
		for j, id := range ki.Holders {
			if j > 0 && id <= ki.Holders[j-1] {
				return encodeError(dst, start, OpKeyInfoResponse, fmt.Errorf("key %d: holders %q, %q not distinct and sorted: %w", i, ki.Holders[j-1], id, meta.ErrBadRequest))
			}
			if _, err := index(id); err != nil {
				return encodeError(dst, start, OpKeyInfoResponse, err)
			}
		}
	}
	dst = le.AppendUint16(dst, uint16(len(table)))
	for _, id := range table {
		dst = appendStr8(dst, id)
	}
	dst = le.AppendUint32(dst, uint32(len(infos)))
	for i := range infos {
		ki := &infos[i]
		var flags byte
		if ki.Present {
			flags |= keyPresent
		}
		if ki.Visible {
			flags |= keyVisible
		}
		dst = append(dst, flags)
		dst = le.AppendUint64(dst, uint64(ki.ExpireAt))
		dst = le.AppendUint16(dst, uint16(len(ki.Holders)))
		for _, id := range ki.Holders {
			idx, _ := index(id)
			dst = le.AppendUint16(dst, uint16(idx))
		}
	}
	return finish(dst, start, OpKeyInfoResponse)
}

// DecodeKeyInfoResult decodes a KEYINFO response body, appending to
// dst[:0] and reusing the Holders slices of dst's elements.
func DecodeKeyInfoResult(h Header, body []byte, lim Limits, dst []meta.KeyInfo) ([]meta.KeyInfo, error) {
	dst = dst[:0]
	d, err := newDec(h, body, OpKeyInfoResponse, lim)
	if err != nil {
		return dst, err
	}
	n := d.count16("node table", 1)
	table := make([]meta.NodeID, 0, n)
	var seen map[meta.NodeID]struct{}
	if n > 16 {
		seen = make(map[meta.NodeID]struct{}, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		id := meta.NodeID(d.str8("node ID", MaxNodeIDLen))
		dup := false
		if seen != nil {
			_, dup = seen[id]
			seen[id] = struct{}{}
		} else {
			dup = slices.Contains(table, id)
		}
		if d.err == nil && dup {
			d.fail(frame.ErrMalformed, "node table entry %d %q listed twice", i, id)
		}
		table = append(table, id)
	}
	r := refs{n: len(table)}
	keys := d.count("keys", d.lim.MaxBatch, keyInfoMinLen)
	for i := 0; i < keys && d.err == nil; i++ {
		var holders []meta.NodeID
		if len(dst) < cap(dst) {
			holders = dst[: len(dst)+1 : len(dst)+1][len(dst)].Holders[:0]
		}
		flags := d.u8("flags")
		ki := meta.KeyInfo{Present: flags&keyPresent != 0, Visible: flags&keyVisible != 0, ExpireAt: d.nonNeg("expire at")}
		hn := int(d.u16("holder count"))
		switch {
		case d.err != nil:
		case flags&^(keyPresent|keyVisible) != 0:
			d.fail(frame.ErrMalformed, "key %d: flags 0x%02x (defined: 0x01 present, 0x02 visible)", i, flags)
		case ki.Visible && !ki.Present:
			d.fail(frame.ErrMalformed, "key %d: visible but not present", i)
		case !ki.Present && (ki.ExpireAt != 0 || hn != 0):
			d.fail(frame.ErrMalformed, "key %d: absent, with expiry %d and %d holders", i, ki.ExpireAt, hn)
		case !d.need(2*hn, "holders"):
		}
		for j := 0; j < hn && d.err == nil; j++ {
			idx := r.use(&d, "node", int(d.u16("node index")))
			if d.err != nil {
				break
			}
			id := table[idx]
			if j > 0 && id <= holders[j-1] {
				d.fail(frame.ErrMalformed, "key %d: holders %q, %q not distinct and sorted", i, holders[j-1], id)
			}
			holders = append(holders, id)
		}
		if hn > 0 {
			ki.Holders = holders
		}
		dst = append(dst, ki)
	}
	r.done(&d, "node")
	if err := d.end(); err != nil {
		return dst[:0], err
	}
	return dst, nil
}

// ---- EXPIRE ----

// Expire is an EXPIRE request (see master.Master.SetExpiry): set (At[i] >
// 0, unix milliseconds on the master's clock) or clear (At[i] == 0) the
// expiry of each key, named keys of one tenant.
type Expire struct {
	Tenant string
	IDs    []uint64
	// Names is the name of each key (nil for chain keys, which the master
	// refuses).
	Names []string
	// At is each key's expiry, unix ms (0: clear it).
	At []int64
	// Force applies to a key present in any state, hidden or not (a value
	// just written); without it only to a visible key.
	Force bool
}

// Keys returns the request's keys, appended to dst[:0].
func (e *Expire) Keys(dst []block.Key) []block.Key { return keysOf(dst, e.Tenant, e.IDs, e.Names) }

// AppendExpire appends an EXPIRE frame.
func AppendExpire(dst []byte, reqID uint64, e *Expire) ([]byte, error) {
	dst, start := begin(dst, OpExpire, reqID)
	if err := checkBatch("expire", e.Tenant, len(e.IDs)); err != nil {
		return encodeError(dst, start, OpExpire, err)
	}
	flags, err := keysFlags("expire", e.IDs, e.Names)
	if err != nil {
		return encodeError(dst, start, OpExpire, err)
	}
	if len(e.At) != len(e.IDs) {
		return encodeError(dst, start, OpExpire, fmt.Errorf("%d expiry times for %d keys: %w", len(e.At), len(e.IDs), meta.ErrBadRequest))
	}
	for i, at := range e.At {
		if at < 0 {
			return encodeError(dst, start, OpExpire, fmt.Errorf("key %d: expiry %d is negative: %w", i, at, meta.ErrBadRequest))
		}
	}
	dst[start+5] = flags
	dst = appendBool(dst, e.Force)
	dst = appendStr8(dst, e.Tenant)
	dst = appendKeys(dst, e.IDs, e.Names)
	for _, at := range e.At {
		dst = le.AppendUint64(dst, uint64(at))
	}
	return finish(dst, start, OpExpire)
}

// DecodeExpire decodes an EXPIRE body into dst, reusing its storage.
func DecodeExpire(h Header, body []byte, lim Limits, dst *Expire) error {
	d, err := newDecFlags(h, body, OpExpire, lim, FlagNamed)
	if err != nil {
		return err
	}
	dst.Force = d.bool("force flag")
	dst.Tenant = d.internTenant(dst.Tenant)
	dst.IDs, dst.Names = d.keys(h.Flags&FlagNamed != 0, dst.IDs, dst.Names)
	dst.At = dst.At[:0]
	if d.need(8*len(dst.IDs), "expiry times") {
		for range dst.IDs {
			dst.At = append(dst.At, d.nonNeg("expire at"))
		}
	}
	return d.end()
}

// AppendExpireResult appends an EXPIRE response: one byte per key, 1 if
// the expiry applied (with force: the key is present), 0 if not.
func AppendExpireResult(dst []byte, reqID uint64, applied []bool) ([]byte, error) {
	return appendBools(dst, OpExpireResponse, reqID, applied)
}

// DecodeExpireResult decodes an EXPIRE response body, appending to dst[:0].
func DecodeExpireResult(h Header, body []byte, lim Limits, dst []bool) ([]bool, error) {
	return decodeBools(h, body, lim, OpExpireResponse, dst)
}

// ---- SCAN ----

// Scan is a SCAN request (see master.Master.Scan).
type Scan struct {
	Tenant string
	// Cursor is 0 to start, then the one the previous response returned.
	Cursor uint64
	// Count is the hint of names per reply (0: the master's default);
	// at most 2^32-1.
	Count int
}

// AppendScan appends a SCAN frame.
func AppendScan(dst []byte, reqID uint64, sc *Scan) ([]byte, error) {
	dst, start := begin(dst, OpScan, reqID)
	if err := checkTenant("scan", sc.Tenant); err != nil {
		return encodeError(dst, start, OpScan, err)
	}
	if sc.Count < 0 || uint64(sc.Count) > 1<<32-1 {
		return encodeError(dst, start, OpScan, fmt.Errorf("count %d (the field holds 0 to %d): %w", sc.Count, uint32(1<<32-1), meta.ErrBadRequest))
	}
	dst = appendStr8(dst, sc.Tenant)
	dst = le.AppendUint64(dst, sc.Cursor)
	dst = le.AppendUint32(dst, uint32(sc.Count))
	return finish(dst, start, OpScan)
}

// DecodeScan decodes a SCAN body into dst.
func DecodeScan(h Header, body []byte, lim Limits, dst *Scan) error {
	d, err := newDec(h, body, OpScan, lim)
	if err != nil {
		return err
	}
	dst.Tenant = d.internTenant(dst.Tenant)
	dst.Cursor = d.u64("cursor")
	dst.Count = int(d.u32("count"))
	return d.end()
}

// ScanResult is a SCAN response: the next cursor (0: the scan is over)
// and a page of names.
type ScanResult struct {
	Cursor uint64
	Names  []string
}

// AppendScanResult appends a SCAN response.
func AppendScanResult(dst []byte, reqID uint64, r *ScanResult) ([]byte, error) {
	dst, start := begin(dst, OpScanResponse, reqID)
	if uint64(len(r.Names)) > 1<<32-1 {
		return encodeError(dst, start, OpScanResponse, fmt.Errorf("%d names, the count field allows %d: %w", len(r.Names), uint32(1<<32-1), frame.ErrBatchTooLong))
	}
	for i, n := range r.Names {
		if n == "" || len(n) > block.MaxNameLen {
			return encodeError(dst, start, OpScanResponse, fmt.Errorf("name %d of %d bytes (want 1 to %d): %w", i, len(n), block.MaxNameLen, frame.ErrTooLong))
		}
	}
	dst = le.AppendUint64(dst, r.Cursor)
	dst = le.AppendUint32(dst, uint32(len(r.Names)))
	for _, n := range r.Names {
		dst = le.AppendUint16(dst, uint16(len(n)))
		dst = append(dst, n...)
	}
	return finish(dst, start, OpScanResponse)
}

// DecodeScanResult decodes a SCAN response body into dst, reusing its
// Names slice.
func DecodeScanResult(h Header, body []byte, lim Limits, dst *ScanResult) error {
	dst.Cursor, dst.Names = 0, dst.Names[:0]
	d, err := newDec(h, body, OpScanResponse, lim)
	if err != nil {
		return err
	}
	cursor := d.u64("cursor")
	n := d.count("names", d.lim.MaxItems, 2+1)
	for i := 0; i < n && d.err == nil; i++ {
		name := d.name(true)
		if d.err == nil {
			dst.Names = append(dst.Names, name)
		}
	}
	if err := d.end(); err != nil {
		dst.Names = dst.Names[:0]
		return err
	}
	dst.Cursor = cursor
	return nil
}

// ---- COUNT ----

// AppendCount appends a COUNT request for tenant.
func AppendCount(dst []byte, reqID uint64, tenant string) ([]byte, error) {
	dst, start := begin(dst, OpCount, reqID)
	if err := checkTenant("count", tenant); err != nil {
		return encodeError(dst, start, OpCount, err)
	}
	dst = appendStr8(dst, tenant)
	return finish(dst, start, OpCount)
}

// DecodeCount decodes a COUNT request body: its tenant.
func DecodeCount(h Header, body []byte) (string, error) {
	d, err := newDec(h, body, OpCount, DefaultLimits())
	if err != nil {
		return "", err
	}
	tenant := d.tenant("tenant")
	if err := d.end(); err != nil {
		return "", err
	}
	return tenant, nil
}

// CountResult is a COUNT response (see master.Master.KeyCounts): a
// tenant's visible named keys, and how many of them have an expiry.
type CountResult struct {
	Keys, Expiring int64
}

// AppendCountResult appends a COUNT response.
func AppendCountResult(dst []byte, reqID uint64, r *CountResult) ([]byte, error) {
	dst, start := begin(dst, OpCountResponse, reqID)
	if r.Keys < 0 || r.Expiring < 0 || r.Expiring > r.Keys {
		return encodeError(dst, start, OpCountResponse, fmt.Errorf("%d keys, %d expiring: %w", r.Keys, r.Expiring, meta.ErrBadRequest))
	}
	dst = le.AppendUint64(dst, uint64(r.Keys))
	dst = le.AppendUint64(dst, uint64(r.Expiring))
	return finish(dst, start, OpCountResponse)
}

// DecodeCountResult decodes a COUNT response body into dst.
func DecodeCountResult(h Header, body []byte, dst *CountResult) error {
	*dst = CountResult{}
	d, err := newDec(h, body, OpCountResponse, DefaultLimits())
	if err != nil {
		return err
	}
	keys, exp := d.nonNeg("keys"), d.nonNeg("expiring")
	if d.err == nil && exp > keys {
		d.fail(frame.ErrMalformed, "%d expiring of %d keys", exp, keys)
	}
	if err := d.end(); err != nil {
		return err
	}
	*dst = CountResult{Keys: keys, Expiring: exp}
	return nil
}
