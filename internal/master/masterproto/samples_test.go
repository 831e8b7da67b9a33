package masterproto

import (
	"bytes"
	"fmt"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/meta"
)

// sample is a message to encode, with its op and request id.
type sample struct {
	name  string
	op    Op
	reqID uint64
	msg   any
}

var t0 = time.Unix(0, 1_700_000_000_123_456_789)

// samples covers every op, request and response.
func samples() []sample {
	inv := meta.Inventory{
		{Key: block.Key{Tenant: "a", ID: 1}, Tier: meta.TierRAM, Size: 4096, Sum: 0xdeadbeef},
		{Key: block.Key{Tenant: "b", ID: 2}, Tier: meta.TierSSD, Size: 0, Sum: 0},
		{Key: block.Key{Tenant: "a", ID: 1}, Tier: meta.TierSSD, Size: 1 << 40, Sum: 7},
	}
	// named: two names sharing id 7 and the chain key 7, kept apart.
	named := meta.Inventory{
		{Key: block.Key{Tenant: "a", ID: 7, Name: "a"}, Tier: meta.TierRAM, Size: 28, Sum: 1},
		{Key: block.Key{Tenant: "a", ID: 7, Name: "b"}, Tier: meta.TierRAM, Size: 8 << 20, Sum: 2},
		{Key: block.Key{Tenant: "a", ID: 7}, Tier: meta.TierRAM, Size: 4096, Sum: 3},
		{Key: block.Key{Tenant: "b", ID: 8, Name: string(make([]byte, block.MaxNameLen))}, Tier: meta.TierSSD, Size: 1, Sum: 4},
	}
	lr := &LookupResult{
		Hit: 2,
		Replicas: []Replica{
			{Node: "n1", Addr: "127.0.0.1:7480", Tier: meta.TierRAM, Size: 65536, Sum: 11},
			{Node: "n2", Addr: "127.0.0.1:7481", Tier: meta.TierSSD, Size: 65536, Sum: 11},
			{Node: "n2", Addr: "127.0.0.1:7481", Tier: meta.TierRAM, Size: 100, Sum: 12},
		},
		Ends: []int{2, 3},
	}
	return []sample{
		// The HELLO goldens of version 1 stay as they were: the HELLO
		// layout never changes, so a version 1 peer is told "version
		// mismatch" rather than "malformed".
		{"hello", OpHello, 1, &Hello{Version: 1, Token: []byte("secret")}},
		{"hello_v2", OpHello, 1, &Hello{Version: Version, Token: []byte("secret")}},
		{"hello_empty_token", OpHello, 2, &Hello{Version: Version}},
		{"hello_reply", OpHelloResponse, 1, &HelloReply{Version: Version, MaxFrame: 1 << 20, MaxBatch: 64, MaxItems: 1024}},
		{"hello_refused", OpHelloResponse, 1, &HelloReply{Version: Version, Code: CodeUnauthorized, Message: "bad token"}},
		{"hello_cluster", OpHello, 3, &Hello{Version: 1, Token: []byte("secret"), ClusterID: "up-0123456789abcdef"}},
		{"hello_reply_cluster", OpHelloResponse, 3, &HelloReply{Version: 1, MaxFrame: 1 << 20, MaxBatch: 64, MaxItems: 1024, ClusterID: "up-0123456789abcdef"}},
		{"hello_follow", OpHello, 4, &Hello{Version: 2, Token: []byte("secret"), ClusterID: "ha", Follows: true, Epoch: 0x1234}},
		{"hello_follow_first", OpHello, 4, &Hello{Version: 2, Follows: true}},
		{"hello_reply_term", OpHelloResponse, 4, &HelloReply{Version: 2, MaxFrame: 1 << 20, MaxBatch: 64, MaxItems: 1024, ClusterID: "ha", Term: true, Epoch: 0x1235, Margin: 500 * time.Millisecond, Leader: "10.0.0.2:7470"}},
		{"hello_reply_not_leader", OpHelloResponse, 4, &HelloReply{Version: 2, Code: CodeNotLeader, Message: "standby", Term: true, Epoch: 0, Leader: "10.0.0.3:7470"}},
		{"register", OpRegister, 3, &Register{
			Info:      meta.NodeInfo{ID: "node-1", Addr: "127.0.0.1:7480", RAMBytes: 1 << 30, SSDBytes: 1 << 34, BlockSize: 65536},
			Usage:     meta.NodeUsage{RAMUsed: 4096, SSDUsed: 1<<40 + 0},
			Inventory: inv,
		}},
		{"register_empty", OpRegister, 4, &Register{Info: meta.NodeInfo{ID: "n", Addr: "h:1"}}},
		{"register_backlog", OpRegister, 4, &Register{Info: meta.NodeInfo{ID: "n", Addr: "h:1"}, Usage: meta.NodeUsage{RAMUsed: 7, Backlog: true}, Inventory: inv[:1]}},
		{"register_reply", OpRegisterResponse, 3, &meta.RegisterReply{Session: 99, HeartbeatInterval: time.Second, NodeTTL: 3 * time.Second}},
		{"heartbeat", OpHeartbeat, 5, &Heartbeat{
			Node: "node-1", Session: 99, Usage: meta.NodeUsage{RAMUsed: 1, SSDUsed: 2},
			Delta: meta.Delta{
				Added:   inv[:2],
				Removed: []meta.ItemKey{{Key: block.Key{Tenant: "c", ID: 5}, Tier: meta.TierRAM}},
				Moved:   []meta.Move{{Key: block.Key{Tenant: "a", ID: 6}, From: meta.TierRAM, To: meta.TierSSD}},
			},
			SSDHits: []block.Key{{Tenant: "d", ID: 7}, {Tenant: "a", ID: 8}},
			Done:    []meta.TaskResult{{ID: 10, OK: true, Bytes: 65536}, {ID: 11}},
		}},
		{"heartbeat_empty", OpHeartbeat, 6, &Heartbeat{Node: "n", Session: 1}},
		{"heartbeat_backlog", OpHeartbeat, 6, &Heartbeat{Node: "n", Session: 1, Usage: meta.NodeUsage{Backlog: true}, Delta: meta.Delta{Added: inv[:1]}}},
		{"heartbeat_named", OpHeartbeat, 5, &Heartbeat{
			Node: "node-1", Session: 99,
			Delta: meta.Delta{
				Added:   named,
				Removed: []meta.ItemKey{{Key: block.Key{Tenant: "c", ID: 5, Name: "x"}, Tier: meta.TierRAM}, {Key: block.Key{Tenant: "c", ID: 5}, Tier: meta.TierRAM}},
				Moved:   []meta.Move{{Key: block.Key{Tenant: "a", ID: 7, Name: "b"}, From: meta.TierRAM, To: meta.TierSSD}},
			},
			SSDHits: []block.Key{{Tenant: "a", ID: 7, Name: "a"}, {Tenant: "a", ID: 7}},
		}},
		{"register_named", OpRegister, 3, &Register{
			Info:      meta.NodeInfo{ID: "node-1", Addr: "127.0.0.1:7480", RAMBytes: 1 << 30, BlockSize: 4096},
			Inventory: named,
		}},
		{"heartbeat_reply_named", OpHeartbeatResponse, 5, &meta.HeartbeatReply{
			HeartbeatInterval: time.Second,
			Tasks: []meta.Task{
				{ID: 1, Kind: meta.TaskDemote, Key: block.Key{Tenant: "x", ID: 7, Name: "a"}},
				{ID: 2, Kind: meta.TaskDrop, Key: block.Key{Tenant: "x", ID: 7, Name: "b"}},
				{ID: 3, Kind: meta.TaskPromote, Key: block.Key{Tenant: "x", ID: 7}},
			},
		}},
		{"heartbeat_reply", OpHeartbeatResponse, 5, &meta.HeartbeatReply{
			HeartbeatInterval: time.Second,
			Tasks: []meta.Task{
				{ID: 1, Kind: meta.TaskDemote, Key: block.Key{Tenant: "x", ID: 1}},
				{ID: 2, Kind: meta.TaskDrop, Key: block.Key{Tenant: "", ID: 2}},
				{ID: 3, Kind: meta.TaskPromote, Key: block.Key{Tenant: "x", ID: 3}},
			},
		}},
		{"lookup", OpLookup, 7, &Lookup{Tenant: "t1", IDs: []uint64{1, 2, 3}, Lease: true}},
		{"lookup_empty", OpLookup, 8, &Lookup{}},
		{"lookup_result", OpLookupResponse, 7, lr},
		{"lookup_miss", OpLookupResponse, 8, &LookupResult{}},
		{"exists", OpExists, 9, &Exists{Tenant: "t1", IDs: []uint64{5, 6}}},
		{"exists_named", OpExists, 9, &Exists{Tenant: "t1", IDs: []uint64{7, 7}, Names: []string{"a", "b"}}},
		{"locate", OpLocate, 14, &Locate{Tenant: "t1", IDs: []uint64{7, 7}, Names: []string{"a", "b"}, Lease: true}},
		{"locate_ids", OpLocate, 15, &Locate{Tenant: "t1", IDs: []uint64{1, 2}}},
		{"locate_empty", OpLocate, 16, &Locate{}},
		{"locate_result", OpLocateResponse, 14, &LookupResult{
			Hit: 3,
			Replicas: []Replica{
				{Node: "n1", Addr: "127.0.0.1:7480", Tier: meta.TierRAM, Size: 28, Sum: 11},
				{Node: "n2", Addr: "127.0.0.1:7481", Tier: meta.TierSSD, Size: 4 << 20, Sum: 12},
			},
			Ends: []int{1, 1, 2},
		}},
		{"exists_result", OpExistsResponse, 9, []bool{true, false, true}},
		{"place", OpPlace, 10, &Place{Tenant: "t1", IDs: []uint64{1, 2}, Sizes: []int64{4096, 0}, Replicas: 2, Hint: "n1", Strategy: meta.LeastUsed}},
		{"place_named", OpPlace, 10, &Place{Tenant: "t1", IDs: []uint64{block.NameID("meta"), 7}, Names: []string{"meta", "kv\x00bytes"},
			Sizes: []int64{28, 4 << 20}, Replicas: 1, Strategy: meta.Hash}},
		{"placement", OpPlaceResponse, 10, &Placement{PerBlock: 2, Degraded: true, Nodes: []Target{
			{"n1", "127.0.0.1:7480"}, {"n2", "127.0.0.1:7481"}, {"n2", "127.0.0.1:7481"}, {"n1", "127.0.0.1:7480"},
		}}},
		{"nodes", OpNodes, 11, nil},
		{"nodes_result", OpNodesResponse, 11, []meta.NodeStatus{{
			Info:    meta.NodeInfo{ID: "n1", Addr: "127.0.0.1:7480", RAMBytes: 100, SSDBytes: 200, BlockSize: 10},
			Session: 5, Alive: true, LastHeartbeat: t0, HeartbeatAge: 250 * time.Millisecond,
			Reported: meta.NodeUsage{RAMUsed: 1, SSDUsed: 2}, Indexed: meta.NodeUsage{RAMUsed: 3, SSDUsed: 4},
			RAMReplicas: 5, SSDReplicas: 6, Evicting: 7, PromotionsQueued: 8, TasksInFlight: 9,
		}, {Info: meta.NodeInfo{ID: "n2", Addr: "h:2"}}}},
		{"query", OpQuery, 12, block.Key{Tenant: "t1", ID: 0xabc}},
		{"query_named", OpQuery, 12, block.Named("t1", "meta-llama/Llama-3.1-8B@1@0@5f3a@bfloat16kv_bytes")},
		{"query_result", OpQueryResponse, 12, []ReplicaStatus{
			{ReplicaStatus: meta.ReplicaStatus{Replica: meta.Replica{Node: "n1", Tier: meta.TierRAM, Size: 10, Sum: 3},
				NodeAlive: true, Evicting: true, LeaseUntil: t0}, Addr: "127.0.0.1:7480"},
			{ReplicaStatus: meta.ReplicaStatus{Replica: meta.Replica{Node: "n2", Tier: meta.TierSSD}}},
		}},
		{"error", OpError, 13, &RemoteError{Code: CodeUnknownNode, Message: "re-register"}},
		{"keyinfo", OpKeyInfo, 17, &KeyInfo{Tenant: "t1", IDs: []uint64{7, 7, 9}, Names: []string{"a", "b", "session:1"}}},
		{"keyinfo_empty", OpKeyInfo, 18, &KeyInfo{Tenant: "t1"}},
		{"keyinfo_result", OpKeyInfoResponse, 17, []meta.KeyInfo{
			{Present: true, Visible: true, ExpireAt: 1_700_000_000_123, Holders: []meta.NodeID{"n1", "n2"}},
			{},
			{Present: true, ExpireAt: 5, Holders: []meta.NodeID{"n0", "n2"}},
		}},
		{"expire", OpExpire, 19, &Expire{Tenant: "t1", IDs: []uint64{7, 7}, Names: []string{"a", "b"}, At: []int64{1_700_000_000_123, 0}, Force: true}},
		{"expire_empty", OpExpire, 20, &Expire{}},
		{"expire_result", OpExpireResponse, 19, expireResult{true, false}},
		{"scan", OpScan, 21, &Scan{Tenant: "t1", Cursor: 0xfedcba9876543210, Count: 10}},
		{"scan_result", OpScanResponse, 21, &ScanResult{Cursor: 0x41, Names: []string{"a", "session:1", string(make([]byte, block.MaxNameLen))}}},
		{"scan_end", OpScanResponse, 22, &ScanResult{}},
		{"count", OpCount, 23, countRequest("t1")},
		{"count_result", OpCountResponse, 23, &CountResult{Keys: 1 << 40, Expiring: 3}},
	}
}

// expireResult is an EXPIRE response sample (EXISTS's is a []bool).
type expireResult []bool

// countRequest is a COUNT request sample: its tenant.
type countRequest string

// encode encodes a sample's message.
func encode(dst []byte, s sample) ([]byte, error) {
	switch m := s.msg.(type) {
	case *Hello:
		return AppendHello(dst, s.reqID, m)
	case *HelloReply:
		return AppendHelloReply(dst, s.reqID, m)
	case *Register:
		return AppendRegister(dst, s.reqID, m)
	case *meta.RegisterReply:
		return AppendRegisterReply(dst, s.reqID, m)
	case *Heartbeat:
		return AppendHeartbeat(dst, s.reqID, m)
	case *meta.HeartbeatReply:
		return AppendHeartbeatReply(dst, s.reqID, m)
	case *Lookup:
		return AppendLookup(dst, s.reqID, m)
	case *Locate:
		return AppendLocate(dst, s.reqID, m)
	case *LookupResult:
		if s.op == OpLocateResponse {
			return AppendLocateResult(dst, s.reqID, m)
		}
		return AppendLookupResult(dst, s.reqID, m)
	case *Exists:
		return AppendExists(dst, s.reqID, m)
	case []bool:
		return AppendExistsResult(dst, s.reqID, m)
	case *Place:
		return AppendPlace(dst, s.reqID, m)
	case *Placement:
		return AppendPlacement(dst, s.reqID, m)
	case nil:
		return AppendNodes(dst, s.reqID), nil
	case []meta.NodeStatus:
		return AppendNodesResult(dst, s.reqID, m)
	case block.Key:
		return AppendQuery(dst, s.reqID, m)
	case []ReplicaStatus:
		return AppendQueryResult(dst, s.reqID, m)
	case *RemoteError:
		return AppendError(dst, s.reqID, m.Code, m.Message), nil
	case *KeyInfo:
		return AppendKeyInfo(dst, s.reqID, m)
	case []meta.KeyInfo:
		return AppendKeyInfoResult(dst, s.reqID, m)
	case *Expire:
		return AppendExpire(dst, s.reqID, m)
	case expireResult:
		return AppendExpireResult(dst, s.reqID, m)
	case *Scan:
		return AppendScan(dst, s.reqID, m)
	case *ScanResult:
		return AppendScanResult(dst, s.reqID, m)
	case countRequest:
		return AppendCount(dst, s.reqID, string(m))
	case *CountResult:
		return AppendCountResult(dst, s.reqID, m)
	}
	return dst, fmt.Errorf("no encoder for %T", s.msg)
}

// decode decodes a frame into the message type of its op.
func decode(h Header, body []byte, lim Limits) (any, error) {
	switch h.Op {
	case OpHello:
		var m Hello
		err := DecodeHello(h, body, lim, &m)
		m.Token = bytes.Clone(m.Token)
		return &m, err
	case OpHelloResponse:
		var m HelloReply
		return &m, DecodeHelloReply(h, body, lim, &m)
	case OpRegister:
		var m Register
		return &m, DecodeRegister(h, body, lim, &m)
	case OpRegisterResponse:
		var m meta.RegisterReply
		return &m, DecodeRegisterReply(h, body, &m)
	case OpHeartbeat:
		var m Heartbeat
		return &m, DecodeHeartbeat(h, body, lim, &m)
	case OpHeartbeatResponse:
		var m meta.HeartbeatReply
		return &m, DecodeHeartbeatReply(h, body, lim, &m)
	case OpLookup:
		var m Lookup
		return &m, DecodeLookup(h, body, lim, &m)
	case OpLookupResponse:
		var m LookupResult
		return &m, DecodeLookupResult(h, body, lim, &m)
	case OpLocate:
		var m Locate
		return &m, DecodeLocate(h, body, lim, &m)
	case OpLocateResponse:
		var m LookupResult
		return &m, DecodeLocateResult(h, body, lim, &m)
	case OpExists:
		var m Exists
		return &m, DecodeExists(h, body, lim, &m)
	case OpExistsResponse:
		return DecodeExistsResult(h, body, lim, nil)
	case OpPlace:
		var m Place
		return &m, DecodePlace(h, body, lim, &m)
	case OpPlaceResponse:
		var m Placement
		return &m, DecodePlacement(h, body, lim, &m)
	case OpNodes:
		return nil, DecodeNodes(h, body)
	case OpNodesResponse:
		return DecodeNodesResult(h, body, lim, nil)
	case OpQuery:
		return DecodeQuery(h, body)
	case OpQueryResponse:
		return DecodeQueryResult(h, body, lim)
	case OpError:
		return DecodeError(h, body)
	case OpKeyInfo:
		var m KeyInfo
		return &m, DecodeKeyInfo(h, body, lim, &m)
	case OpKeyInfoResponse:
		return DecodeKeyInfoResult(h, body, lim, nil)
	case OpExpire:
		var m Expire
		return &m, DecodeExpire(h, body, lim, &m)
	case OpExpireResponse:
		b, err := DecodeExpireResult(h, body, lim, nil)
		return expireResult(b), err
	case OpScan:
		var m Scan
		return &m, DecodeScan(h, body, lim, &m)
	case OpScanResponse:
		var m ScanResult
		return &m, DecodeScanResult(h, body, lim, &m)
	case OpCount:
		tenant, err := DecodeCount(h, body)
		return countRequest(tenant), err
	case OpCountResponse:
		var m CountResult
		return &m, DecodeCountResult(h, body, &m)
	}
	return nil, fmt.Errorf("op %v: %w", h.Op, frame.ErrUnknownOp)
}
