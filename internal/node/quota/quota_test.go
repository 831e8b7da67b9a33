package quota

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
)

func k(tenant string, id uint64) block.Key { return block.Key{Tenant: tenant, ID: id} }

// TestLedger runs sequences of charges and releases and checks usage,
// refusals and the refusal message after each step.
func TestLedger(t *testing.T) {
	type step struct {
		op      string // "reserve", "set", "release"
		key     block.Key
		size    int64
		wantErr bool
		usage   map[string]int64 // after the step
	}
	cases := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{"under quota ok", Options{DefaultBytes: 100}, []step{
			{"reserve", k("a", 1), 40, false, map[string]int64{"a": 40}},
			{"reserve", k("a", 2), 60, false, map[string]int64{"a": 100}},
		}},
		{"over quota refused", Options{DefaultBytes: 100}, []step{
			{"reserve", k("a", 1), 60, false, map[string]int64{"a": 60}},
			{"reserve", k("a", 2), 41, true, map[string]int64{"a": 60}},
		}},
		{"replacing a key charges the difference", Options{DefaultBytes: 100}, []step{
			{"reserve", k("a", 1), 90, false, map[string]int64{"a": 90}},
			{"reserve", k("a", 1), 100, false, map[string]int64{"a": 100}},
		}},
		{"release frees", Options{DefaultBytes: 100}, []step{
			{"reserve", k("a", 1), 100, false, map[string]int64{"a": 100}},
			{"reserve", k("a", 2), 1, true, map[string]int64{"a": 100}},
			{"release", k("a", 1), 0, false, map[string]int64{"a": 0}},
			{"reserve", k("a", 2), 1, false, map[string]int64{"a": 1}},
			{"release", k("a", 9), 0, false, map[string]int64{"a": 1}},
		}},
		{"tenants independent", Options{DefaultBytes: 100, Tenants: map[string]int64{"big": 1000}}, []step{
			{"reserve", k("a", 1), 100, false, map[string]int64{"a": 100, "b": 0}},
			{"reserve", k("b", 1), 100, false, map[string]int64{"a": 100, "b": 100}},
			{"reserve", k("a", 2), 1, true, map[string]int64{"a": 100, "b": 100}},
			{"reserve", k("big", 1), 500, false, map[string]int64{"big": 500, "a": 100}},
		}},
		{"zero is unlimited", Options{Tenants: map[string]int64{"capped": 10}}, []step{
			{"reserve", k("a", 1), 1 << 40, false, map[string]int64{"a": 1 << 40}},
			{"reserve", k("capped", 1), 11, true, map[string]int64{"capped": 0}},
		}},
		{"override 0 is unlimited under a default", Options{DefaultBytes: 10, Tenants: map[string]int64{"free": 0}}, []step{
			{"reserve", k("free", 1), 1000, false, map[string]int64{"free": 1000}},
			{"reserve", k("other", 1), 11, true, map[string]int64{"other": 0}},
		}},
		{"set ignores the quota", Options{DefaultBytes: 10}, []step{
			{"set", k("a", 1), 50, false, map[string]int64{"a": 50}},
			{"reserve", k("a", 2), 1, true, map[string]int64{"a": 50}},
			{"release", k("a", 1), 0, false, map[string]int64{"a": 0}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := New(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range c.steps {
				var err error
				switch s.op {
				case "reserve":
					err = l.Reserve(s.key, s.size)
				case "set":
					l.Set(s.key, s.size)
				case "release":
					l.Release(s.key)
				}
				if (err != nil) != s.wantErr {
					t.Fatalf("step %d %s %s: err %v, want error %v", i, s.op, s.key, err, s.wantErr)
				}
				if err != nil {
					if !errors.Is(err, kvpool.ErrQuota) {
						t.Errorf("step %d: %v does not match kvpool.ErrQuota", i, err)
					}
					for _, want := range []string{`tenant "` + s.key.Tenant + `"`, "quota"} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("step %d: %q does not say %q", i, err, want)
						}
					}
				}
				for tenant, want := range s.usage {
					if got := l.Usage(tenant); got != want {
						t.Errorf("step %d: usage of %q = %d, want %d", i, tenant, got, want)
					}
				}
			}
		})
	}
}

// TestRefusalMessage: the error names the tenant, the quota and the usage.
func TestRefusalMessage(t *testing.T) {
	l, err := New(Options{DefaultBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reserve(k("acme", 1), 700); err != nil {
		t.Fatal(err)
	}
	err = l.Reserve(k("acme", 2), 400)
	for _, want := range []string{`tenant "acme"`, "uses 700", "1000-byte quota", "to 1100"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	st := l.Stats()
	if len(st) != 1 || st[0] != (TenantStats{Tenant: "acme", Bytes: 700, Blocks: 1, Limit: 1000, Rejections: 1}) {
		t.Errorf("Stats = %+v", st)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want string // "" = valid
	}{
		{"zero", Options{}, ""},
		{"overrides", Options{DefaultBytes: 1, Tenants: map[string]int64{"a": 0, "b-2.x": 5}}, ""},
		{"negative default", Options{DefaultBytes: -1}, "DefaultBytes"},
		{"negative override", Options{Tenants: map[string]int64{"a": -5}}, `Tenants["a"]`},
		{"bad tenant name", Options{Tenants: map[string]int64{"a b": 5}}, `Tenants["a b"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.opts)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("New: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("New: error %v, want one naming %s", err, c.want)
			}
		})
	}
}
