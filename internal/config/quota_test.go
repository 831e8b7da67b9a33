package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestQuotaConfig: quota.default_bytes from every layer, per-tenant
// overrides from the file (YAML and JSON), and errors naming the field.
func TestQuotaConfig(t *testing.T) {
	cases := []struct {
		name        string
		file        string
		env, flags  map[string]string
		wantDefault Size
		wantTenants map[string]Size
		wantErr     []string // substrings of the error; nil = valid
	}{
		{name: "default unlimited", wantDefault: 0},
		{name: "yaml", file: "quota:\n  default_bytes: 1GiB\n  tenants:\n    acme: 2GiB\n    free: 0\n",
			wantDefault: 1 << 30, wantTenants: map[string]Size{"acme": 2 << 30, "free": 0}},
		{name: "json", file: "node.json\x00" + `{"quota": {"default_bytes": "64MiB", "tenants": {"a.b-c": "1MiB"}}}`,
			wantDefault: 64 << 20, wantTenants: map[string]Size{"a.b-c": 1 << 20}},
		{name: "env", env: map[string]string{"KVPOOL_QUOTA_DEFAULT_BYTES": "5MiB"}, wantDefault: 5 << 20},
		{name: "flag beats file", file: "quota:\n  default_bytes: 1GiB\n", flags: map[string]string{"quota-default-bytes": "2MiB"}, wantDefault: 2 << 20},
		{name: "bad size", file: "quota:\n  tenants:\n    acme: lots\n", wantErr: []string{"quota.tenants.acme", "lots"}},
		{name: "bad tenant name", file: "quota:\n  tenants:\n    \"a b\": 1MiB\n", wantErr: []string{"quota.tenants.a b", "bad tenant name"}},
		{name: "bad default", env: map[string]string{"KVPOOL_QUOTA_DEFAULT_BYTES": "-3"}, wantErr: []string{"quota.default_bytes"}},
		{name: "tenants not a mapping", file: "quota:\n  tenants: 5\n", wantErr: []string{"quota.tenants"}},
		{name: "duplicate tenant", file: "quota:\n  tenants:\n    a: 1MiB\n    a: 2MiB\n", wantErr: []string{"duplicate", "quota.tenants.a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Load(src(c.file, c.env, c.flags))
			if c.wantErr != nil {
				if err == nil {
					t.Fatalf("Load succeeded with %+v, want an error", l.Node.Quota)
				}
				for _, w := range c.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if l.Node.Quota.DefaultBytes != c.wantDefault {
				t.Errorf("default_bytes = %v, want %v", l.Node.Quota.DefaultBytes, c.wantDefault)
			}
			if len(c.wantTenants) > 0 || len(l.Node.Quota.Tenants) > 0 {
				if !reflect.DeepEqual(l.Node.Quota.Tenants, c.wantTenants) {
					t.Errorf("tenants = %v, want %v", l.Node.Quota.Tenants, c.wantTenants)
				}
			}
		})
	}
}
