package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Source says which layer a value came from.
type Source int

// The layers, lowest precedence first.
const (
	FromDefault Source = iota + 1
	FromFile
	FromEnv
	FromFlag
)

// Origin is where a setting's effective value came from.
type Origin struct {
	Source Source
	// Name is the file's path, the environment variable or the flag name
	// (without dashes); empty for FromDefault.
	Name string
	// Line is the line in the file (FromFile only).
	Line int
}

// String returns "default", "file node.yaml:3", "env KVPOOL_SSD_PATH" or
// "flag --ssd-path".
func (o Origin) String() string {
	if o.Source == FromFile && o.Line > 0 {
		return o.Short() + ":" + strconv.Itoa(o.Line)
	}
	return o.Short()
}

// Short is String without the file's line number.
func (o Origin) Short() string {
	switch o.Source {
	case FromDefault:
		return "default"
	case FromFile:
		return "file " + o.Name
	case FromEnv:
		return "env " + o.Name
	case FromFlag:
		return "flag --" + o.Name
	}
	return "unknown"
}

// Sources are the inputs of Load, lowest precedence first: the defaults,
// then File, then the environment, then Flags.
type Sources struct {
	// File is the configuration file's path; empty means none.
	File string
	// ReadFile reads File (default os.ReadFile).
	ReadFile func(name string) ([]byte, error)
	// Env looks up an environment variable (os.LookupEnv in cmd/); nil
	// means an empty environment. A variable set to "" counts as set.
	Env func(name string) (string, bool)
	// Flags are the flags the user set explicitly, by flag name without
	// dashes (Field.Flag) → value as typed.
	Flags map[string]string
	// WorkDir is the directory a relative ssd.path is taken relative to
	// (default: the process's working directory).
	WorkDir string
}

// Loaded is a loaded, valid configuration with the provenance of each
// value.
type Loaded struct {
	// Node is the effective configuration.
	Node Node
	// Origins maps every key (Field.Key) to where its value came from.
	Origins map[string]Origin
	// Warnings are things the user should know but that do not stop the
	// node: a Mooncake alias overridden by kvpool's name in the same
	// source, an SSD path given while SSD offload is off, a secret passed
	// as a flag. They never contain the auth token.
	Warnings []string
}

// Origin returns where key's value came from.
func (l *Loaded) Origin(key string) Origin { return l.Origins[key] }

// maxFileSize bounds the configuration file: a node's file is under 2 KiB,
// so anything past 1 MiB is the wrong file.
const maxFileSize = 1 << 20

// Load builds the node configuration from the defaults, the file, the
// environment and the flags, in that order of precedence, and validates
// it. Every error names the key, the value (never the auth token's) and
// where it came from; all bad values are reported at once (errors.Join).
func Load(src Sources) (*Loaded, error) {
	fs := fields()
	l := &Loaded{Node: Defaults(), Origins: make(map[string]Origin, len(fs))}
	for _, f := range fs {
		l.Origins[f.key] = Origin{Source: FromDefault}
	}
	var errs []error
	set := func(f field, v string, o Origin) {
		if err := f.set(&l.Node, v); err != nil {
			shown := v
			if f.secret {
				shown = Secret(v).String()
			}
			errs = append(errs, &FieldError{Key: f.key, Value: shown, Origin: o, Reason: err.Error()})
			return
		}
		l.Origins[f.key] = o
	}

	if src.File != "" {
		entries, err := readFile(src)
		if err != nil {
			return nil, err
		}
		l.applyFile(fs, src.File, entries, set)
	}
	l.applyEnv(fs, src.Env, set)
	if err := l.applyFlags(fs, src.Flags, set); err != nil {
		errs = append(errs, err)
	}
	if err := l.absSSDPath(src.WorkDir); err != nil {
		return nil, err
	}
	l.warnUnusedSSDPath()
	if path := l.Node.TenantTokensFile; path != "" {
		if !filepath.IsAbs(path) && src.WorkDir != "" {
			path = filepath.Join(src.WorkDir, path)
			l.Node.TenantTokensFile = path
		}
		toks, err := ReadTenantTokens(path)
		if err != nil {
			errs = append(errs, &FieldError{Key: "tenant_tokens_file", Value: path, Origin: l.Origins["tenant_tokens_file"],
				Reason: strings.TrimPrefix(err.Error(), "config: ")})
		} else {
			l.Node.TenantTokens = toks
		}
	}
	// Validate the rest even when some values did not parse, so that every
	// bad value is reported at once; a key that did not parse holds its
	// default, which is not worth a second error.
	unparsed := make(map[string]bool)
	for _, e := range errs {
		if fe, ok := e.(*FieldError); ok {
			unparsed[fe.Key] = true
		}
	}
	for _, e := range l.Node.fieldErrors() {
		if !unparsed[e.Key] {
			e.Origin = l.Origins[e.Key]
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return l, nil
}

// readFile reads and parses the configuration file.
func readFile(src Sources) ([]entry, error) {
	read := src.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	data, err := read(src.File)
	if err != nil {
		return nil, fmt.Errorf("config: read config file: %w", err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("config: read config file %s: %d bytes, more than the %d a node configuration can need", src.File, len(data), maxFileSize)
	}
	entries, err := parseFile(src.File, data)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return entries, nil
}

// applyFile sets the file's entries. Where a Mooncake alias and kvpool's
// own key are both in the file, kvpool's key wins and a warning says so.
func (l *Loaded) applyFile(fs []field, file string, entries []entry, set func(field, string, Origin)) {
	at := make(map[string]entry, len(entries))
	for _, e := range entries {
		at[e.key] = e
	}
	for _, a := range fileAliases() {
		e, ok := at[a.name]
		if !ok {
			continue
		}
		if own, ok := at[a.target]; ok {
			l.Warnings = append(l.Warnings, fmt.Sprintf(
				"config file %s: both %s (line %d) and Mooncake's %s (line %d) are set; using %s",
				file, a.target, own.line, a.name, e.line, a.target))
			continue
		}
		f, _ := findField(fs, a.target)
		set(f, e.value, Origin{Source: FromFile, Name: file, Line: e.line})
	}
	for _, e := range entries {
		if f, ok := findField(fs, e.key); ok {
			set(f, e.value, Origin{Source: FromFile, Name: file, Line: e.line})
		} else if name, ok := strings.CutPrefix(e.key, quotaTenantsKey+"."); ok {
			set(tenantQuotaField(name), e.value, Origin{Source: FromFile, Name: file, Line: e.line})
		}
	}
}

// tenantQuotaField is the file setting quota.tenants.<name>: one tenant's
// quota, a size.
func tenantQuotaField(name string) field {
	return field{key: quotaTenantsKey + "." + name, usage: "quota of tenant " + name,
		set: func(n *Node, v string) error {
			s, err := ParseSize(v)
			if err != nil {
				return err
			}
			if n.Quota.Tenants == nil {
				n.Quota.Tenants = make(map[string]Size)
			}
			n.Quota.Tenants[name] = s
			return nil
		},
		show: func(n *Node) string { return n.Quota.Tenants[name].String() },
	}
}

// applyEnv sets the variables present in the environment: Mooncake's
// names first, then kvpool's, which win (with a warning) when both are
// set.
func (l *Loaded) applyEnv(fs []field, env func(string) (string, bool), set func(field, string, Origin)) {
	if env == nil {
		return
	}
	for _, a := range envAliases() {
		v, ok := env(a.name)
		if !ok {
			continue
		}
		own := envName(a.target)
		if _, ok := env(own); ok {
			l.Warnings = append(l.Warnings, fmt.Sprintf(
				"environment: both %s and Mooncake's %s are set; using %s", own, a.name, own))
			continue
		}
		f, _ := findField(fs, a.target)
		set(f, v, Origin{Source: FromEnv, Name: a.name})
	}
	for _, f := range fs {
		name := envName(f.key)
		if v, ok := env(name); ok {
			set(f, v, Origin{Source: FromEnv, Name: name})
		}
	}
}

// applyFlags sets the flags, in name order. An unknown flag name is a
// programming error in cmd/, reported as such.
func (l *Loaded) applyFlags(fs []field, flags map[string]string, set func(field, string, Origin)) error {
	byFlag := make(map[string]field, len(fs))
	for _, f := range fs {
		byFlag[flagName(f.key)] = f
	}
	names := make([]string, 0, len(flags))
	for name := range flags {
		names = append(names, name)
	}
	slices.Sort(names)
	var unknown []string
	for _, name := range names {
		f, ok := byFlag[name]
		if !ok {
			unknown = append(unknown, "--"+name)
			continue
		}
		set(f, flags[name], Origin{Source: FromFlag, Name: name})
		if f.secret {
			l.Warnings = append(l.Warnings, fmt.Sprintf(
				"%s was given as a flag, which other users can read in the process list; prefer %s or the config file",
				f.key, envName(f.key)))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown configuration flag %s", strings.Join(unknown, ", "))
	}
	return nil
}

// absSSDPath makes a relative SSD path absolute against workDir (the
// working directory by default) and cleans it. A path with a ".." element
// is left for validation to refuse.
func (l *Loaded) absSSDPath(workDir string) error {
	p := l.Node.SSD.Path
	if p == "" || hasDotDot(p) || strings.ContainsRune(p, 0) {
		return nil
	}
	if !filepath.IsAbs(p) {
		if workDir == "" {
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("config: make ssd.path %q (from %s) absolute: %w", p, l.Origins["ssd.path"], err)
			}
			workDir = wd
		}
		p = filepath.Join(workDir, p)
	}
	l.Node.SSD.Path = filepath.Clean(p)
	return nil
}

// warnUnusedSSDPath warns when an SSD path is set but SSD offload is off:
// the silently-off SSD tier is a real Mooncake bug (fixed in v0.3.12).
func (l *Loaded) warnUnusedSSDPath() {
	n := l.Node
	if n.SSD.Enabled || n.SSD.Path == "" {
		return
	}
	l.Warnings = append(l.Warnings, fmt.Sprintf(
		"ssd.path is set (from %s) but SSD offload is off (ssd.enabled false, from %s); "+
			"set ssd.enabled (or enable_ssd_offload, %s, MOONCAKE_OFFLOAD_ENABLED, --%s) to use it",
		l.Origins["ssd.path"], l.Origins["ssd.enabled"], envName("ssd.enabled"), flagName("ssd.enabled")))
}
