package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func masterDefaults() Master {
	return Master{Listen: "127.0.0.1:7470", AdminListen: "127.0.0.1:7471", NodeTTL: 3 * time.Second,
		HeartbeatInterval: time.Second, LeaseTTL: 5 * time.Second, Eviction: "lru", Placement: "local-first", MaxPerHeartbeat: 16}
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestLoadMasterPrecedence: defaults, then KVPOOL_MASTER_*, then flags;
// the node's variables only fill what is still empty.
func TestLoadMasterPrecedence(t *testing.T) {
	env := envOf(map[string]string{
		"KVPOOL_MASTER_NODE_TTL": "9s", "KVPOOL_MASTER_LEASE_TTL": "7s", "KVPOOL_MASTER_MAX_PER_HEARTBEAT": "3",
		EnvAuthToken: "node-token-0123456789", EnvSharedNamespaces: "public:alice; docs",
	})
	m, err := LoadMaster(MasterSources{Defaults: masterDefaults(), Env: env,
		Flags: map[string]string{"node-ttl": "4s", "eviction-policy": "fifo"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.NodeTTL != 4*time.Second || m.LeaseTTL != 7*time.Second || m.HeartbeatInterval != time.Second {
		t.Errorf("timers %v %v %v, want 4s (flag) 7s (env) 1s (default)", m.NodeTTL, m.LeaseTTL, m.HeartbeatInterval)
	}
	if m.Eviction != "fifo" || m.Placement != "local-first" || m.MaxPerHeartbeat != 3 {
		t.Errorf("eviction %q placement %q max %d", m.Eviction, m.Placement, m.MaxPerHeartbeat)
	}
	if m.AuthToken.Reveal() != "node-token-0123456789" {
		t.Errorf("token not taken from %s", EnvAuthToken)
	}
	if len(m.SharedNamespaces) != 2 || m.SharedNamespaces[0].Name != "public" {
		t.Errorf("shared namespaces %+v", m.SharedNamespaces)
	}

	// The master's own variable and the flag win over the node's.
	m, err = LoadMaster(MasterSources{Defaults: masterDefaults(), Env: envOf(map[string]string{
		EnvAuthToken: "node-token-0123456789", "KVPOOL_MASTER_AUTH_TOKEN": "master-token-0123456789"})})
	if err != nil || m.AuthToken.Reveal() != "master-token-0123456789" {
		t.Errorf("token %q, %v; want the KVPOOL_MASTER_ one", m.AuthToken.Reveal(), err)
	}
	m, err = LoadMaster(MasterSources{Defaults: masterDefaults(), Env: envOf(map[string]string{
		"KVPOOL_MASTER_AUTH_TOKEN": "master-token-0123456789"}), Flags: map[string]string{"auth-token": "flag-token-0123456789"}})
	if err != nil || m.AuthToken.Reveal() != "flag-token-0123456789" {
		t.Errorf("token %q, %v; want the flag's", m.AuthToken.Reveal(), err)
	}
}

// TestLoadMasterErrors: every bad value is named with where it came from,
// and a token never shows.
func TestLoadMasterErrors(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "tokens")
	if err := os.WriteFile(open, []byte("alice alice-token-0123456789\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadMaster(MasterSources{Defaults: masterDefaults(),
		Env:   envOf(map[string]string{"KVPOOL_MASTER_NODE_TTL": "x", EnvTenantTokensFile: open}),
		Flags: map[string]string{"max-per-heartbeat": "many", "shared-namespaces": "a:b:c", "bogus": "1"}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"KVPOOL_MASTER_NODE_TTL", "max-per-heartbeat", "shared-namespaces", EnvTenantTokensFile, "--bogus"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("alice alice-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := LoadMaster(MasterSources{Defaults: masterDefaults(), Flags: map[string]string{"tenant-tokens-file": good}})
	if err != nil {
		t.Fatal(err)
	}
	if m.TenantTokens["alice"].Reveal() != "alice-token-0123456789" || len(m.AuthOptions().TenantTokens) != 1 {
		t.Errorf("tenant tokens %v", m.TenantTokens)
	}
}

// TestLoadMasterClusterID: the flag, then KVPOOL_MASTER_CLUSTER_ID, then
// the node's KVPOOL_CLUSTER_ID; a bad ID is refused with its source.
func TestLoadMasterClusterID(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		flags map[string]string
		want  string
	}{
		{"none", nil, nil, ""},
		{"node variable", map[string]string{EnvClusterID: "c-node"}, nil, "c-node"},
		{"master variable", map[string]string{EnvClusterID: "c-node", "KVPOOL_MASTER_CLUSTER_ID": "c-master"}, nil, "c-master"},
		{"flag", map[string]string{EnvClusterID: "c-node"}, map[string]string{"cluster-id": "c-flag"}, "c-flag"},
	} {
		m, err := LoadMaster(MasterSources{Defaults: masterDefaults(), Env: envOf(tc.env), Flags: tc.flags})
		if err != nil || m.ClusterID != tc.want {
			t.Errorf("%s: cluster ID %q, %v; want %q", tc.name, m.ClusterID, err, tc.want)
		}
	}
	_, err := LoadMaster(MasterSources{Defaults: masterDefaults(), Env: envOf(map[string]string{EnvClusterID: "a/b"})})
	if err == nil || !strings.Contains(err.Error(), "cluster-id") || !strings.Contains(err.Error(), EnvClusterID) {
		t.Errorf("bad cluster ID: %v; want an error naming cluster-id and %s", err, EnvClusterID)
	}
}
