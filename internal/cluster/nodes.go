package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// maxNodesBody bounds the /nodes response read: 16 MiB, thousands of nodes'
// worth of JSON.
const maxNodesBody = 16 << 20

// NodeState is one node as the master's /nodes endpoint lists it.
type NodeState struct {
	ID   string
	Addr string
	Live bool
	// Session identifies the registration the master lists: every
	// registration of a node (a restart, a re-registration after a
	// partition) gets a new one, so a change of session is how a waiter
	// tells a new process from its predecessor's registration, which
	// stays live for up to the node TTL after a kill. 0 when the list
	// carries no session.
	Session uint64
}

// FetchNodes reads the master's node list from its admin endpoint
// http://adminAddr/nodes. It accepts a JSON array of node objects, or an
// object holding one under any key; a node's ID, address and liveness are
// read from the fields id/ID/name, addr/Addr and alive/live, and its
// session from session (also inside a nested "info" object),
// case-insensitively. A node without a liveness field counts as live.
func FetchNodes(ctx context.Context, hc *http.Client, adminAddr string) ([]NodeState, error) {
	ns, _, err := fetchNodes(ctx, hc, adminAddr)
	return ns, err
}

// clusterIDHeader is the master's admin header naming its cluster ID
// (masterserver.ClusterIDHeader; not imported, so that this package does
// not link the master).
const clusterIDHeader = "Kvpool-Cluster-Id"

// fetchNodes is FetchNodes, also returning the cluster ID the master
// reported with the list ("" for none).
func fetchNodes(ctx context.Context, hc *http.Client, adminAddr string) ([]NodeState, string, error) {
	url := "http://" + adminAddr + "/nodes"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", fmt.Errorf("cluster: GET %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("cluster: GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxNodesBody))
	if err != nil {
		return nil, "", fmt.Errorf("cluster: read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("cluster: GET %s: %s: %.200s", url, resp.Status, body)
	}
	ns, err := ParseNodes(body)
	if err != nil {
		return nil, "", fmt.Errorf("cluster: %s: %w", url, err)
	}
	return ns, resp.Header.Get(clusterIDHeader), nil
}

// ParseNodes decodes a /nodes body (see FetchNodes for the accepted
// shapes).
func ParseNodes(body []byte) ([]NodeState, error) {
	// Numbers stay json.Number: sessions are 64-bit and consecutive ones
	// would round to the same float64.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode node list: %w", err)
	}
	list, ok := v.([]any)
	if !ok {
		obj, isObj := v.(map[string]any)
		if !isObj {
			return nil, fmt.Errorf("decode node list: want a JSON array or object, got %T", v)
		}
		for _, x := range obj {
			if l, isList := x.([]any); isList {
				list, ok = l, true
				break
			}
		}
		if !ok && len(obj) == 0 {
			return nil, nil
		}
		if !ok {
			return nil, fmt.Errorf("decode node list: no array in the object")
		}
	}
	out := make([]NodeState, 0, len(list))
	for i, x := range list {
		obj, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("decode node list: entry %d is %T, want an object", i, x)
		}
		s := NodeState{Live: true}
		scan := func(m map[string]any) {
			for k, val := range m {
				switch strings.ToLower(k) {
				case "id", "name", "node", "node_id", "nodeid":
					if str, ok := val.(string); ok && s.ID == "" {
						s.ID = str
					}
				case "addr", "address", "data_addr":
					if str, ok := val.(string); ok && s.Addr == "" {
						s.Addr = str
					}
				case "alive", "live":
					if b, ok := val.(bool); ok {
						s.Live = b
					}
				case "session":
					if n, ok := val.(json.Number); ok && s.Session == 0 {
						s.Session, _ = strconv.ParseUint(n.String(), 10, 64)
					}
				}
			}
		}
		scan(obj)
		for k, val := range obj {
			if strings.EqualFold(k, "info") {
				if m, ok := val.(map[string]any); ok {
					scan(m)
				}
			}
		}
		if s.ID == "" {
			return nil, fmt.Errorf("decode node list: entry %d has no id", i)
		}
		out = append(out, s)
	}
	return out, nil
}
