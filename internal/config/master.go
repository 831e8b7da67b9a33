package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/meta"
)

// The master's environment. Like the node's settings, every master setting
// has an environment form, read by LoadMaster through the lookup function
// cmd/ passes; a flag set on the command line wins over it.
const (
	// MasterEnvPrefix prefixes the environment form of each master flag:
	// --node-ttl is KVPOOL_MASTER_NODE_TTL.
	MasterEnvPrefix = "KVPOOL_MASTER_"
	// EnvAuthToken holds the shared auth token: the node's variable
	// (auth_token), which the master reads too when neither
	// --auth-token nor KVPOOL_MASTER_AUTH_TOKEN gives one, so that one
	// environment configures both (and a variable, unlike a flag, is not
	// visible in the process list).
	EnvAuthToken = "KVPOOL_AUTH_TOKEN"
	// EnvTenantTokensFile and EnvSharedNamespaces are the node's variables
	// for the tenant tokens file and the shared namespaces, the master's
	// fallbacks after its own KVPOOL_MASTER_* forms, as EnvAuthToken is.
	EnvTenantTokensFile = "KVPOOL_TENANT_TOKENS_FILE"
	EnvSharedNamespaces = "KVPOOL_SHARED_NAMESPACES"
	// EnvClusterID is the node's variable for its cluster ID (cluster_id),
	// the master's fallback after KVPOOL_MASTER_CLUSTER_ID, as EnvAuthToken
	// is.
	EnvClusterID = "KVPOOL_CLUSTER_ID"
)

// Master is the effective configuration of the master process. Unlike
// Node it has no file: LoadMaster builds it from the defaults cmd/ passes,
// the environment and the flags. Placement and Eviction stay text, for
// the master's own parsers to check.
type Master struct {
	// Listen is the control-plane address (flag listen).
	Listen string
	// AdminListen is the admin HTTP address, "off" to disable it (flag
	// admin-listen).
	AdminListen string
	// NodeTTL, HeartbeatInterval and LeaseTTL are the master's timers
	// (flags node-ttl, heartbeat, lease-ttl).
	NodeTTL, HeartbeatInterval, LeaseTTL time.Duration
	// Eviction is the global eviction policy (flag eviction-policy).
	Eviction string
	// Placement is the default placement strategy (flag placement).
	Placement string
	// MaxPerHeartbeat caps the promotions handed to a node per heartbeat
	// (flag max-per-heartbeat).
	MaxPerHeartbeat int
	// AuthToken is the cluster token (flag auth-token); it never prints.
	AuthToken Secret
	// ClusterID names the cluster this master serves (flag cluster-id,
	// see meta.CheckClusterID); "" for none.
	ClusterID string
	// TenantTokensFile is the tenant tokens file (flag
	// tenant-tokens-file); LoadMaster reads it into TenantTokens.
	TenantTokensFile string
	// TenantTokens are the tenants' own tokens, from TenantTokensFile.
	TenantTokens map[string]Secret
	// SharedNamespaces are the namespaces every tenant may read (flag
	// shared-namespaces, see ParseSharedNamespaces).
	SharedNamespaces []auth.Namespace
	// Etcd lists etcd's client URLs (flag etcd, comma-separated): the
	// master campaigns to lead its cluster (ClusterID names the
	// election) and stands by while another leads. Empty: it serves
	// alone.
	Etcd []string
	// ElectionTTL is the lease of the master's etcd session (flag
	// election-ttl, whole seconds): a dead leader is replaced about this
	// long after it stopped renewing.
	ElectionTTL time.Duration
	// Advertise is the control-plane address other hosts reach this
	// master at (flag advertise; default: the listen address, which must
	// then name a host).
	Advertise string
}

// AuthOptions returns the auth table options of the configuration.
func (m Master) AuthOptions() auth.Options {
	return AuthOptions(m.AuthToken, m.TenantTokens, m.SharedNamespaces)
}

// MasterSources are the inputs of LoadMaster, lowest precedence first.
type MasterSources struct {
	// Defaults is the configuration before the environment and the flags
	// (cmd/ takes it from the master's and its server's defaults).
	// SharedNamespaces is ignored: there are none by default.
	Defaults Master
	// Env looks up an environment variable (os.LookupEnv in cmd/); nil
	// means an empty environment.
	Env func(name string) (string, bool)
	// Flags are the flags the user set explicitly, by flag name without
	// dashes (MasterEnv's argument) → value as typed.
	Flags map[string]string
}

// MasterEnv returns the environment variable of the master flag flagName:
// "node-ttl" → KVPOOL_MASTER_NODE_TTL.
func MasterEnv(flagName string) string {
	return MasterEnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// masterField is one master setting, keyed by its flag name.
type masterField struct {
	flag string
	// fallback is the variable read when the setting is still empty after
	// the flags and its own variable ("" for none).
	fallback string
	set      func(m *Master, v string) error
	empty    func(m *Master) bool
}

// masterFields returns the master's settings table, fresh on every call.
func masterFields() []masterField {
	str := func(flag, fallback string, p func(*Master) *string) masterField {
		return masterField{flag: flag, fallback: fallback,
			set:   func(m *Master, v string) error { *p(m) = v; return nil },
			empty: func(m *Master) bool { return *p(m) == "" }}
	}
	dur := func(flag string, p func(*Master) *time.Duration) masterField {
		return masterField{flag: flag, set: func(m *Master, v string) error {
			d, err := time.ParseDuration(v)
			if err == nil && d <= 0 {
				return errors.New("want a duration > 0")
			}
			*p(m) = d
			return err
		}}
	}
	return []masterField{
		str("listen", "", func(m *Master) *string { return &m.Listen }),
		str("admin-listen", "", func(m *Master) *string { return &m.AdminListen }),
		dur("node-ttl", func(m *Master) *time.Duration { return &m.NodeTTL }),
		dur("heartbeat", func(m *Master) *time.Duration { return &m.HeartbeatInterval }),
		dur("lease-ttl", func(m *Master) *time.Duration { return &m.LeaseTTL }),
		str("eviction-policy", "", func(m *Master) *string { return &m.Eviction }),
		str("placement", "", func(m *Master) *string { return &m.Placement }),
		{flag: "max-per-heartbeat", set: func(m *Master, v string) error {
			n, err := strconv.ParseInt(v, 0, strconv.IntSize) // as the int flag parses it
			if err == nil && n <= 0 {
				return errors.New("want a number > 0")
			}
			m.MaxPerHeartbeat = int(n)
			return err
		}},
		{flag: "auth-token", fallback: EnvAuthToken,
			set:   func(m *Master, v string) error { m.AuthToken = Secret(v); return nil },
			empty: func(m *Master) bool { return m.AuthToken == "" }},
		str("tenant-tokens-file", EnvTenantTokensFile, func(m *Master) *string { return &m.TenantTokensFile }),
		{flag: "cluster-id", fallback: EnvClusterID,
			set: func(m *Master, v string) error {
				m.ClusterID = v
				return meta.CheckClusterID(v)
			},
			empty: func(m *Master) bool { return m.ClusterID == "" }},
		{flag: "etcd", set: func(m *Master, v string) error {
			urls, err := SplitURLs(v)
			m.Etcd = urls
			return err
		}},
		{flag: "election-ttl", set: func(m *Master, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return err
			}
			if d < 2*time.Second || d%time.Second != 0 {
				return errors.New("want whole seconds, at least 2s")
			}
			m.ElectionTTL = d
			return nil
		}},
		str("advertise", "", func(m *Master) *string { return &m.Advertise }),
		{flag: "shared-namespaces", fallback: EnvSharedNamespaces,
			set: func(m *Master, v string) error {
				ns, err := ParseSharedNamespaces(v)
				m.SharedNamespaces = ns
				return err
			},
			empty: func(m *Master) bool { return len(m.SharedNamespaces) == 0 }},
	}
}

// LoadMaster builds the master's configuration: the defaults, then each
// setting's KVPOOL_MASTER_* variable, then the flags set, then, for the
// token, the tenant tokens file and the shared namespaces when still
// empty, the node's variables (EnvAuthToken and its siblings). It reads
// the tenant tokens file. Every error names the setting, the value
// (never a token's) and where it came from; all bad values are reported
// at once (errors.Join).
func LoadMaster(src MasterSources) (Master, error) {
	m := src.Defaults
	m.SharedNamespaces = nil
	env := src.Env
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	var errs []error
	set := func(f masterField, v string, o Origin) {
		if err := f.set(&m, v); err != nil {
			shown := v
			if f.flag == "auth-token" {
				shown = Secret(v).String()
			}
			errs = append(errs, &FieldError{Key: f.flag, Value: shown, Origin: o, Reason: err.Error()})
		}
	}
	fs := masterFields()
	origins := make(map[string]Origin, len(fs))
	for _, f := range fs {
		origins[f.flag] = Origin{Source: FromDefault}
		if v, ok := src.Flags[f.flag]; ok {
			origins[f.flag] = Origin{Source: FromFlag, Name: f.flag}
			set(f, v, origins[f.flag])
		} else if name := MasterEnv(f.flag); hasEnv(env, name) {
			v, _ := env(name)
			origins[f.flag] = Origin{Source: FromEnv, Name: name}
			set(f, v, origins[f.flag])
		}
		if f.fallback != "" && f.empty(&m) && hasEnv(env, f.fallback) {
			v, _ := env(f.fallback)
			origins[f.flag] = Origin{Source: FromEnv, Name: f.fallback}
			set(f, v, origins[f.flag])
		}
	}
	if err := unknownFlags(src.Flags, fs); err != nil {
		errs = append(errs, err)
	}
	if m.TenantTokensFile != "" {
		toks, err := ReadTenantTokens(m.TenantTokensFile)
		if err != nil {
			errs = append(errs, &FieldError{Key: "tenant-tokens-file", Value: m.TenantTokensFile, Origin: origins["tenant-tokens-file"],
				Reason: strings.TrimPrefix(err.Error(), "config: ")})
		}
		m.TenantTokens = toks
	}
	if len(m.Etcd) == 0 {
		for _, k := range []string{"election-ttl", "advertise"} {
			if o := origins[k]; o.Source != FromDefault {
				errs = append(errs, &FieldError{Key: k, Value: src.Flags[k], Origin: o, Reason: "only a master campaigning on etcd uses it: set --etcd too"})
			}
		}
	}
	if len(m.Etcd) > 0 && m.ClusterID == "" {
		errs = append(errs, &FieldError{Key: "etcd", Value: strings.Join(m.Etcd, ","), Origin: origins["etcd"],
			Reason: "set --cluster-id too: the masters of a cluster campaign under its ID"})
	}
	if m.Advertise != "" {
		if err := checkAddr(m.Advertise, false); err != nil {
			errs = append(errs, &FieldError{Key: "advertise", Value: m.Advertise, Origin: origins["advertise"], Reason: err.Error()})
		}
	}
	if len(errs) > 0 {
		return Master{}, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return m, nil
}

// hasEnv reports whether name is set in env.
func hasEnv(env func(string) (string, bool), name string) bool {
	_, ok := env(name)
	return ok
}

// unknownFlags reports flag names that are no master setting: a
// programming error in cmd/.
func unknownFlags(flags map[string]string, fs []masterField) error {
	var unknown []string
	for name := range flags {
		if !slices.ContainsFunc(fs, func(f masterField) bool { return f.flag == name }) {
			unknown = append(unknown, "--"+name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("unknown master flag %s", strings.Join(unknown, ", "))
}
