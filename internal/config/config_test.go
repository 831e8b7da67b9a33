package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// src builds Sources from in-memory inputs: file is the content of
// "node.yaml" (or of name when given as "name\x00content").
func src(file string, env, flags map[string]string) Sources {
	s := Sources{Flags: flags, WorkDir: "/work"}
	if file != "" {
		name, content, ok := strings.Cut(file, "\x00")
		if !ok {
			name, content = "node.yaml", file
		}
		s.File = name
		s.ReadFile = func(n string) ([]byte, error) {
			if n != name {
				return nil, fs.ErrNotExist
			}
			return []byte(content), nil
		}
	}
	if env != nil {
		s.Env = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	}
	return s
}

func mustLoad(t *testing.T, s Sources) *Loaded {
	t.Helper()
	l, err := Load(s)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return l
}

func TestDefaults(t *testing.T) {
	l := mustLoad(t, Sources{})
	if !reflect.DeepEqual(l.Node, Defaults()) {
		t.Errorf("Load with no sources = %+v, want Defaults() %+v", l.Node, Defaults())
	}
	d := Defaults()
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", d.Listen, "127.0.0.1:7480"},
		{"admin_listen", d.AdminListen, "127.0.0.1:7481"},
		{"block_size", d.BlockSize, Size(256 << 10)},
		{"max_object_bytes", d.MaxObjectBytes, Size(64 << 20)},
		{"ram.chunk_bytes", d.RAM.ChunkBytes, Size(4 << 10)},
		{"ram.bytes", d.RAM.Bytes, Size(1 << 30)},
		{"ram.policy", d.RAM.Policy, "lru"},
		{"ssd.enabled", d.SSD.Enabled, false},
		{"ssd.sync", string(d.SSD.Sync), "batch"},
		{"promotion.threshold", d.Promotion.Threshold, 2},
		{"promotion.ram_watermark", d.Promotion.RAMWatermark, 0.95},
		{"ram.high_watermark", d.RAM.HighWatermark, 0.95},
		{"ram.low_watermark", d.RAM.LowWatermark, 0.9},
		{"pacers.net_egress", d.Pacers.NetEgress, Bandwidth(0)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("default %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	for key, o := range l.Origins {
		if o.Source != FromDefault || o.String() != "default" {
			t.Errorf("origin of %s = %v, want default", key, o)
		}
	}
	if len(l.Origins) != len(Fields()) {
		t.Errorf("%d origins for %d fields", len(l.Origins), len(Fields()))
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Defaults().Validate() = %v", err)
	}
	if len(l.Warnings) != 0 {
		t.Errorf("warnings with defaults: %v", l.Warnings)
	}
}

func TestPrecedence(t *testing.T) {
	const file = "listen: 0.0.0.0:1\nram:\n  bytes: 2GiB\nssd:\n  path: /file\npacers:\n  net_egress: 1Gbps\n"
	tests := []struct {
		name       string
		file       string
		env, flags map[string]string
		key        string
		get        func(Node) any
		want       any
		origin     string
	}{
		{"default", "", nil, nil, "ram.bytes", func(n Node) any { return n.RAM.Bytes }, Size(1 << 30), "default"},
		{"file over default", file, nil, nil, "ram.bytes", func(n Node) any { return n.RAM.Bytes }, Size(2 << 30), "file node.yaml:3"},
		{"env over file", file, map[string]string{"KVPOOL_RAM_BYTES": "512MiB"}, nil, "ram.bytes", func(n Node) any { return n.RAM.Bytes }, Size(512 << 20), "env KVPOOL_RAM_BYTES"},
		{"flag over env", file, map[string]string{"KVPOOL_RAM_BYTES": "512MiB"}, map[string]string{"ram-bytes": "1.5GB"}, "ram.bytes", func(n Node) any { return n.RAM.Bytes }, Size(1500000000), "flag --ram-bytes"},
		{"flag over default", "", nil, map[string]string{"ram-bytes": "3GiB"}, "ram.bytes", func(n Node) any { return n.RAM.Bytes }, Size(3 << 30), "flag --ram-bytes"},
		{"env over default", "", map[string]string{"KVPOOL_LISTEN": "127.0.0.1:9"}, nil, "listen", func(n Node) any { return n.Listen }, "127.0.0.1:9", "env KVPOOL_LISTEN"},
		{"file top level", file, nil, nil, "listen", func(n Node) any { return n.Listen }, "0.0.0.0:1", "file node.yaml:1"},
		{"file ssd path", file, nil, nil, "ssd.path", func(n Node) any { return n.SSD.Path }, "/file", "file node.yaml:5"},
		{"env ssd path over file", file, map[string]string{"KVPOOL_SSD_PATH": "/env"}, nil, "ssd.path", func(n Node) any { return n.SSD.Path }, "/env", "env KVPOOL_SSD_PATH"},
		{"flag ssd path over env", file, map[string]string{"KVPOOL_SSD_PATH": "/env"}, map[string]string{"ssd-path": "/flag"}, "ssd.path", func(n Node) any { return n.SSD.Path }, "/flag", "flag --ssd-path"},
		{"file pacer", file, nil, nil, "pacers.net_egress", func(n Node) any { return n.Pacers.NetEgress }, Bandwidth(1.25e8), "file node.yaml:7"},
		{"env pacer", file, map[string]string{"KVPOOL_PACERS_NET_EGRESS": "off"}, nil, "pacers.net_egress", func(n Node) any { return n.Pacers.NetEgress }, Bandwidth(0), "env KVPOOL_PACERS_NET_EGRESS"},
		{"untouched key stays default", file, map[string]string{"KVPOOL_RAM_BYTES": "1GiB"}, nil, "ssd.bytes", func(n Node) any { return n.SSD.Bytes }, DefaultSSDBytes, "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLoad(t, src(tt.file, tt.env, tt.flags))
			if got := tt.get(l.Node); got != tt.want {
				t.Errorf("%s = %v, want %v", tt.key, got, tt.want)
			}
			if got := l.Origin(tt.key).String(); got != tt.origin {
				t.Errorf("origin of %s = %q, want %q", tt.key, got, tt.origin)
			}
		})
	}
}

func TestMooncakeAliases(t *testing.T) {
	tests := []struct {
		name        string
		file        string
		env         map[string]string
		wantEnabled bool
		wantPath    string
		origins     map[string]string
		warning     string // substring of the one expected warning; "" for none
	}{
		{
			name: "file aliases", file: "enable_ssd_offload: true\nssd_offload_path: /mc\n",
			wantEnabled: true, wantPath: "/mc",
			origins: map[string]string{"ssd.enabled": "file node.yaml:1", "ssd.path": "file node.yaml:2"},
		},
		{
			name: "env aliases", env: map[string]string{"MOONCAKE_OFFLOAD_ENABLED": "1", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": "/mc"},
			wantEnabled: true, wantPath: "/mc",
			origins: map[string]string{"ssd.enabled": "env MOONCAKE_OFFLOAD_ENABLED", "ssd.path": "env MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"},
		},
		{
			name: "kvpool key wins in the same file", file: "ssd_offload_path: /mc\nssd:\n  enabled: true\n  path: /kv\n",
			wantEnabled: true, wantPath: "/kv",
			origins: map[string]string{"ssd.path": "file node.yaml:4"},
			warning: "both ssd.path (line 4) and Mooncake's ssd_offload_path (line 1) are set; using ssd.path",
		},
		{
			name: "kvpool enabled key wins in the same file", file: "enable_ssd_offload: false\nssd:\n  enabled: true\n  path: /kv\n",
			wantEnabled: true, wantPath: "/kv",
			origins: map[string]string{"ssd.enabled": "file node.yaml:3"},
			warning: "both ssd.enabled (line 3) and Mooncake's enable_ssd_offload (line 1)",
		},
		{
			name:        "kvpool variable wins in the environment",
			env:         map[string]string{"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": "/mc", "KVPOOL_SSD_PATH": "/kv", "KVPOOL_SSD_ENABLED": "true"},
			wantEnabled: true, wantPath: "/kv",
			origins: map[string]string{"ssd.path": "env KVPOOL_SSD_PATH"},
			warning: "both KVPOOL_SSD_PATH and Mooncake's MOONCAKE_OFFLOAD_FILE_STORAGE_PATH are set; using KVPOOL_SSD_PATH",
		},
		{
			name:    "kvpool enabled variable wins in the environment",
			env:     map[string]string{"MOONCAKE_OFFLOAD_ENABLED": "true", "KVPOOL_SSD_ENABLED": "false"},
			origins: map[string]string{"ssd.enabled": "env KVPOOL_SSD_ENABLED"},
			warning: "both KVPOOL_SSD_ENABLED and Mooncake's MOONCAKE_OFFLOAD_ENABLED",
		},
		{
			name: "Mooncake variable overrides kvpool's key in the file",
			file: "ssd:\n  enabled: true\n  path: /file\n", env: map[string]string{"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": "/mc"},
			wantEnabled: true, wantPath: "/mc",
			origins: map[string]string{"ssd.enabled": "file node.yaml:2", "ssd.path": "env MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"},
		},
		{
			name: "JSON file aliases", file: "node.json\x00{\"enable_ssd_offload\": true,\n\"ssd_offload_path\": \"/mc\"}",
			wantEnabled: true, wantPath: "/mc",
			origins: map[string]string{"ssd.enabled": "file node.json:1", "ssd.path": "file node.json:2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLoad(t, src(tt.file, tt.env, nil))
			if l.Node.SSD.Enabled != tt.wantEnabled || l.Node.SSD.Path != tt.wantPath {
				t.Errorf("ssd = enabled %v path %q, want %v %q", l.Node.SSD.Enabled, l.Node.SSD.Path, tt.wantEnabled, tt.wantPath)
			}
			for key, want := range tt.origins {
				if got := l.Origin(key).String(); got != want {
					t.Errorf("origin of %s = %q, want %q", key, got, want)
				}
			}
			var aliasWarnings []string
			for _, w := range l.Warnings {
				if strings.Contains(w, "Mooncake's") {
					aliasWarnings = append(aliasWarnings, w)
				}
			}
			switch {
			case tt.warning == "" && len(aliasWarnings) > 0:
				t.Errorf("unexpected warnings %q", aliasWarnings)
			case tt.warning != "" && (len(aliasWarnings) != 1 || !strings.Contains(aliasWarnings[0], tt.warning)):
				t.Errorf("warnings %q, want one containing %q", aliasWarnings, tt.warning)
			}
		})
	}
}

func TestUnusedSSDPathWarns(t *testing.T) {
	l := mustLoad(t, src("", map[string]string{"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": "/mc"}, nil))
	if l.Node.SSD.Enabled {
		t.Fatal("SSD offload on without being enabled")
	}
	want := "ssd.path is set (from env MOONCAKE_OFFLOAD_FILE_STORAGE_PATH) but SSD offload is off (ssd.enabled false, from default)"
	if len(l.Warnings) != 1 || !strings.Contains(l.Warnings[0], want) {
		t.Errorf("warnings = %q, want one containing %q", l.Warnings, want)
	}
	if line := l.StartupLine(); !strings.Contains(line, "SSD offload: off (default)") {
		t.Errorf("startup line %q does not say SSD offload is off", line)
	}
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		env   map[string]string
		flags map[string]string
		want  string // substring of the error
	}{
		{"ssd path required", "", map[string]string{"KVPOOL_SSD_ENABLED": "true", "KVPOOL_SSD_PATH": ""}, nil,
			`ssd.path: "" (from env KVPOOL_SSD_PATH): required when SSD offload is on`},
		{"ssd path required, default", "ssd:\n  enabled: true\n", nil, nil,
			`ssd.path: "" (from default): required when SSD offload is on`},
		{"ssd path dotdot", "", map[string]string{"KVPOOL_SSD_PATH": "../../etc"}, nil,
			`ssd.path: "../../etc" (from env KVPOOL_SSD_PATH): unsafe SSD path: contains a ".." element`},
		{"ssd path dotdot that cleans away", "ssd:\n  path: /data/../etc\n", nil, nil,
			`ssd.path: "/data/../etc" (from file node.yaml:2): unsafe SSD path`},
		{"ssd bytes too small", "", map[string]string{"KVPOOL_SSD_ENABLED": "on", "KVPOOL_SSD_PATH": "/d"}, map[string]string{"ssd-bytes": "4KiB"},
			`ssd.bytes: "4.0 KiB" (from flag --ssd-bytes): holds no object of block_size 256.0 KiB`},
		{"ssd sync", "", map[string]string{"KVPOOL_SSD_SYNC": "sometimes"}, nil,
			`ssd.sync: "sometimes" (from env KVPOOL_SSD_SYNC): want none, batch or always`},
		{"ssd high watermark", "ssd:\n  high_watermark: 1.5\n", nil, nil,
			`ssd.high_watermark: "1.5" (from file node.yaml:2): want a fraction in (0, 1]`},
		{"ssd low above high", "ssd:\n  high_watermark: 0.5\n  low_watermark: 0.6\n", nil, nil,
			`ssd.low_watermark: "0.6" (from file node.yaml:3): above ssd.high_watermark 0.5`},
		{"listen", "", map[string]string{"KVPOOL_LISTEN": "nowhere"}, nil,
			`listen: "nowhere" (from env KVPOOL_LISTEN): want host:port`},
		{"listen port", "", nil, map[string]string{"listen": "127.0.0.1:99999"}, `listen: "127.0.0.1:99999" (from flag --listen): port "99999"`},
		{"admin same as listen", "", map[string]string{"KVPOOL_ADMIN_LISTEN": "127.0.0.1:7480"}, nil,
			`admin_listen: "127.0.0.1:7480" (from env KVPOOL_ADMIN_LISTEN): the same address as listen`},
		{"master port 0", "master: host:0\n", nil, nil, `master: "host:0" (from file node.yaml:1): port 0`},
		{"master no host", "", map[string]string{"KVPOOL_MASTER": ":7470"}, nil, `master: ":7470" (from env KVPOOL_MASTER): no host`},
		{"node name", "node_name: a b\n", nil, nil, `node_name: "a b" (from file node.yaml:1): character ' '`},
		{"heartbeat", "heartbeat_interval: 0s\n", nil, nil, `heartbeat_interval: "0s" (from file node.yaml:1): want at least 1ms`},
		{"block size zero", "block_size: 0\n", nil, nil, `block_size: "0 B" (from file node.yaml:1): want 1 B to 1.0 GiB`},
		{"block size huge", "block_size: 2GiB\n", nil, nil, `block_size: "2.0 GiB" (from file node.yaml:1)`},
		{"max object zero", "max_object_bytes: 0\n", nil, nil, `max_object_bytes: "0 B" (from file node.yaml:1): want 1 B to 512.0 MiB`},
		{"max object over 512 MiB", "", map[string]string{"KVPOOL_MAX_OBJECT_BYTES": "513MiB"}, nil, `max_object_bytes: "513.0 MiB" (from env KVPOOL_MAX_OBJECT_BYTES): want 1 B to 512.0 MiB`},
		{"chunk not a power of two", "", nil, map[string]string{"ram-chunk-bytes": "3000"}, `ram.chunk_bytes: "3000 B (2.9 KiB)" (from flag --ram-chunk-bytes): want a power of two from 64 B to 1.0 MiB`},
		{"chunk too small", "", map[string]string{"KVPOOL_RAM_CHUNK_BYTES": "32"}, nil, `ram.chunk_bytes: "32 B" (from env KVPOOL_RAM_CHUNK_BYTES): want a power of two`},
		{"chunk too large", "ram:\n  chunk_bytes: 2MiB\n", nil, nil, `ram.chunk_bytes: "2.0 MiB" (from file node.yaml:2): want a power of two`},
		{"ram smaller than a block", "", map[string]string{"KVPOOL_RAM_BYTES": "1KiB"}, nil,
			`ram.bytes: "1.0 KiB" (from env KVPOOL_RAM_BYTES): smaller than block_size 256.0 KiB, the typical object size the RAM eviction policy is sized for (lower block_size)`},
		{"ram too many chunks", "", map[string]string{"KVPOOL_RAM_BYTES": "8191PiB", "KVPOOL_BLOCK_SIZE": "4KiB"}, nil,
			`ram.bytes: "9222246136947933184 B (8.0 EiB)" (from env KVPOOL_RAM_BYTES): makes 2251524935778304 chunks of 4.0 KiB (ram.chunk_bytes), limit 2147483647`},
		{"ram too many small chunks", "", map[string]string{"KVPOOL_RAM_BYTES": "256GiB", "KVPOOL_RAM_CHUNK_BYTES": "64B", "KVPOOL_BLOCK_SIZE": "4KiB"}, nil,
			`ram.bytes: "256.0 GiB" (from env KVPOOL_RAM_BYTES): makes 4294967296 chunks of 64 B (ram.chunk_bytes), limit 2147483647`},
		{"ram keeps no object", "ram:\n  bytes: 400KiB\n  low_watermark: 0.005\nblock_size: 4KiB\n", nil, nil,
			`ram.bytes: "400.0 KiB" (from file node.yaml:2): keeps no object resident: ram.low_watermark 0.005 of it is less than one chunk of 4.0 KiB`},
		{"max object one byte over 512 MiB", "", nil, map[string]string{"max-object-bytes": "536870913"},
			`max_object_bytes: "536870913 B (512.0 MiB)" (from flag --max-object-bytes): want 1 B to 512.0 MiB`},
		{"max object 1.5GiB", "max_object_bytes: 1.5GiB\n", nil, nil, `max_object_bytes: "1.5 GiB" (from file node.yaml:1): want 1 B to 512.0 MiB`},
		{"max object negative", "max_object_bytes: -1\n", nil, nil, `max_object_bytes: "-1" (from file node.yaml:1): want a size like`},
		{"ram policy unknown", "ram:\n  policy: mru\n", nil, nil, `ram.policy: "mru" (from file node.yaml:2): policy: spec "mru": unknown eviction policy`},
		{"ram policy oracle", "", map[string]string{"KVPOOL_RAM_POLICY": "belady"}, nil, `ram.policy: "belady" (from env KVPOOL_RAM_POLICY): belady needs to know the future`},
		{"ram low above high", "", map[string]string{"KVPOOL_RAM_HIGH_WATERMARK": "0.5", "KVPOOL_RAM_LOW_WATERMARK": "0.6"}, nil,
			`ram.low_watermark: "0.6" (from env KVPOOL_RAM_LOW_WATERMARK): above ram.high_watermark 0.5`},
		{"ram high watermark", "ram:\n  high_watermark: 1.2\n", nil, nil, `ram.high_watermark: "1.2" (from file node.yaml:2): want a fraction in (0, 1]`},
		{"promotion threshold", "promotion:\n  threshold: 0\n", nil, nil, `promotion.threshold: "0" (from file node.yaml:2): want at least 1 touch`},
		{"promotion watermark", "", map[string]string{"KVPOOL_PROMOTION_RAM_WATERMARK": "0"}, nil, `promotion.ram_watermark: "0" (from env KVPOOL_PROMOTION_RAM_WATERMARK): want a fraction in (0, 1]`},
		{"promotion watermark NaN", "", map[string]string{"KVPOOL_PROMOTION_RAM_WATERMARK": "NaN"}, nil, `promotion.ram_watermark: "NaN"`},
		{"promotion queue", "", nil, map[string]string{"promotion-queue-cap": "0"}, `promotion.queue_cap: "0" (from flag --promotion-queue-cap): want at least 1`},
		{"max per heartbeat", "promotion:\n  max_per_heartbeat: -1\n", nil, nil, `promotion.max_per_heartbeat: "-1" (from file node.yaml:2): negative`},
		{"auth token short", "", map[string]string{"KVPOOL_AUTH_TOKEN": "hunter2"}, nil, `auth_token: "[redacted]" (from env KVPOOL_AUTH_TOKEN): shorter than 16 bytes`},
		{"auth token spaces", "auth_token: \"correct horse battery staple\"\n", nil, nil, `auth_token: "[redacted]" (from file node.yaml:1): contains spaces`},
		// Values that do not parse.
		{"size syntax", "", map[string]string{"KVPOOL_RAM_BYTES": "lots"}, nil, `ram.bytes: "lots" (from env KVPOOL_RAM_BYTES): want a size like`},
		{"size unit", "ram:\n  bytes: 4GiG\n", nil, nil, `ram.bytes: "4GiG" (from file node.yaml:2): unknown unit "GiG"`},
		{"bandwidth syntax", "", nil, map[string]string{"pacers-ssd-read": "fast"}, `pacers.ssd_read: "fast" (from flag --pacers-ssd-read): want a bandwidth like`},
		{"bool syntax", "ssd:\n  enabled: maybe\n", nil, nil, `ssd.enabled: "maybe" (from file node.yaml:2): want true or false`},
		{"alias bool syntax", "", map[string]string{"MOONCAKE_OFFLOAD_ENABLED": "y"}, nil, `ssd.enabled: "y" (from env MOONCAKE_OFFLOAD_ENABLED): want true or false`},
		{"int syntax", "promotion:\n  queue_cap: 1.5\n", nil, nil, `promotion.queue_cap: "1.5" (from file node.yaml:2): want a whole number`},
		{"float syntax", "", map[string]string{"KVPOOL_SSD_LOW_WATERMARK": "most"}, nil, `ssd.low_watermark: "most" (from env KVPOOL_SSD_LOW_WATERMARK): want a number`},
		{"duration syntax", "heartbeat_interval: 5\n", nil, nil, `heartbeat_interval: "5" (from file node.yaml:1): want a duration`},
		{"unknown flag", "", nil, map[string]string{"ram-byte": "1GiB"}, `unknown configuration flag --ram-byte`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(src(tt.file, tt.env, tt.flags))
			if err == nil {
				t.Fatalf("Load succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n  %v\nwant it to contain:\n  %s", err, tt.want)
			}
			var fe *FieldError
			if !strings.HasPrefix(tt.name, "unknown flag") && !errors.As(err, &fe) {
				t.Errorf("error %v holds no *FieldError", err)
			}
		})
	}
}

func TestAllBadValuesReportedAtOnce(t *testing.T) {
	_, err := Load(src("", map[string]string{"KVPOOL_RAM_BYTES": "0", "KVPOOL_SSD_SYNC": "x", "KVPOOL_LISTEN": "y"}, nil))
	if err == nil {
		t.Fatal("Load succeeded")
	}
	for _, key := range []string{"ram.bytes", "ssd.sync", "listen"} {
		if !strings.Contains(err.Error(), key+":") {
			t.Errorf("error %q does not name %s", err, key)
		}
	}
}

func TestValidateWithoutOrigins(t *testing.T) {
	n := Defaults()
	n.SSD.Enabled = true
	err := n.Validate()
	if err == nil || err.Error() != `ssd.path: "": required when SSD offload is on` {
		t.Errorf("Validate() = %v", err)
	}
	n.SSD.Path = "relative/dir"
	if err := n.Validate(); err == nil || !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("Validate() with a relative SSD path = %v, want 'not absolute'", err)
	}
	if err := (Node{}).Validate(); err == nil {
		t.Error("the zero Node validates; want errors (Load fills the defaults)")
	}
}

func TestSSDPathMadeAbsolute(t *testing.T) {
	tests := []struct{ in, want string }{
		{"kv", "/work/kv"},
		{"./data/kv/", "/work/data/kv"},
		{"/abs//kv/", "/abs/kv"},
	}
	for _, tt := range tests {
		l := mustLoad(t, src("", map[string]string{"KVPOOL_SSD_ENABLED": "true", "KVPOOL_SSD_PATH": tt.in}, nil))
		if l.Node.SSD.Path != tt.want {
			t.Errorf("ssd.path %q → %q, want %q", tt.in, l.Node.SSD.Path, tt.want)
		}
	}
}

func TestFileFormats(t *testing.T) {
	const wantRAM = Size(4 << 30)
	tests := []struct {
		name, file string
	}{
		{"yaml", "node.yaml\x00ram:\n  bytes: 4GiB\n"},
		{"yml", "node.yml\x00ram: {bytes: 4GiB}\n"},
		{"json", "node.json\x00{\"ram\": {\"bytes\": \"4GiB\"}}"},
		{"json by content", "node.conf\x00  \n{\"ram\": {\"bytes\": \"4GiB\"}}"},
		{"yaml by content", "node.conf\x00# comment\nram:\n  bytes: 4GiB\n"},
		{"json number", "n.json\x00{\"ram\": {\"bytes\": 4294967296}}"},
		{"yaml number", "n.yaml\x00ram:\n  bytes: 4294967296\n"},
		{"yaml quoted", "n.yaml\x00ram:\n  bytes: \"4 GiB\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLoad(t, src(tt.file, nil, nil))
			if l.Node.RAM.Bytes != wantRAM {
				t.Errorf("ram.bytes = %v, want %v", l.Node.RAM.Bytes, wantRAM)
			}
		})
	}
	for _, empty := range []string{"n.yaml\x00", "n.yaml\x00# nothing\n", "n.json\x00  \n", "n.yaml\x00~\n", "n.yaml\x00ssd:\n"} {
		l := mustLoad(t, src(empty, nil, nil))
		if !reflect.DeepEqual(l.Node, Defaults()) {
			t.Errorf("file %q: not the defaults", empty)
		}
	}
}

func TestFileErrors(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"unknown top-level key", "listen: 127.0.0.1:1\nlisten_addr: x\n", `node.yaml:2: unknown key "listen_addr"`},
		{"unknown nested key with suggestion", "ram:\n  bytes: 1GiB\nssd:\n  enabled: false\n  pth: /x\n", `node.yaml:5: unknown key "ssd.pth" (did you mean "ssd.path"?)`},
		{"unknown section", "disk:\n  path: /x\n", `node.yaml:1: unknown key "disk"`},
		{"alias is top-level only", "ssd:\n  ssd_offload_path: /x\n", `node.yaml:2: unknown key "ssd.ssd_offload_path"`},
		{"json unknown key", "node.json\x00{\n  \"ram\": {\n    \"bytes\": \"1GiB\",\n    \"polcy\": \"lru\"\n  }\n}", `node.json:4: unknown key "ram.polcy" (did you mean "ram.policy"?)`},
		{"several unknown keys", "a: 1\nram:\n  b: 2\n", `node.yaml:3: unknown key "ram.b"`},
		{"duplicate key", "listen: a:1\nlisten: b:2\n", `node.yaml:2: duplicate key "listen" (first at line 1)`},
		{"json duplicate key", "n.json\x00{\"master\": \"a:1\",\n\"master\": \"b:1\"}", `n.json:2: duplicate key "master" (first at line 1)`},
		{"list value", "listen:\n  - a\n", `node.yaml:2: listen: want a single value`},
		{"mapping value", "ram:\n  bytes:\n    x: 1\n", `ram.bytes: want a single value`},
		{"section as scalar", "ssd: /data\n", `node.yaml:1: ssd: want a mapping of ssd.* settings`},
		{"json section as scalar", "n.json\x00{\"pacers\": 5}", `n.json:1: pacers: want an object`},
		{"json array value", "n.json\x00{\"listen\": [1]}", `listen: want a single value`},
		{"null value", "master:\n", `node.yaml:1: master: no value`},
		{"json null value", "n.json\x00{\"master\": null}", `master: no value`},
		{"yaml alias", "listen: &a x:1\nmaster: *a\n", `master: YAML aliases (*a) are not supported`},
		{"two documents", "listen: a:1\n---\nlisten: b:1\n", `more than one YAML document`},
		{"not a mapping", "- a\n- b\n", `the file must be a mapping`},
		{"json not an object", "n.json\x00[1]", `the file must be a JSON object`},
		{"json trailing data", "n.json\x00{} {}", `trailing data`},
		{"json broken", "n.json\x00{\"listen\": ", `parse n.json as JSON`},
		{"yaml broken", "ram: [\n", `parse node.yaml as YAML`},
		{"complex key", "? [a]\n: 1\n", `keys must be plain names`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(src(tt.file, nil, nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	t.Run("several unknown keys are all reported", func(t *testing.T) {
		_, err := Load(src("a: 1\nram:\n  b: 2\n", nil, nil))
		if err == nil || !strings.Contains(err.Error(), `node.yaml:1: unknown key "a"`) || !strings.Contains(err.Error(), `node.yaml:3: unknown key "ram.b"`) {
			t.Errorf("error %v does not name both keys", err)
		}
	})
	t.Run("error count is capped", func(t *testing.T) {
		_, err := Load(src(strings.Repeat("nokey: 1\n", 1000), nil, nil))
		if err == nil {
			t.Fatal("Load succeeded")
		}
		msg := err.Error()
		if n := strings.Count(msg, "unknown key"); n != maxFileErrors || !strings.Contains(msg, "too many errors") {
			t.Errorf("%d unknown-key errors (want %d) and a 'too many errors' line in:\n%s", n, maxFileErrors, msg)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(Sources{File: filepath.Join(t.TempDir(), "absent.yaml")})
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "absent.yaml") {
			t.Errorf("Load of a missing file = %v, want ErrNotExist naming the file", err)
		}
	})
	t.Run("file too large", func(t *testing.T) {
		big := "n.yaml\x00" + strings.Repeat("#\n", maxFileSize)
		if _, err := Load(src(big, nil, nil)); err == nil || !strings.Contains(err.Error(), "more than the") {
			t.Errorf("Load of a huge file = %v", err)
		}
	})
	t.Run("real file on disk", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "node.yaml")
		if err := os.WriteFile(p, []byte("ram:\n  bytes: 2GiB\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		l := mustLoad(t, Sources{File: p})
		if l.Node.RAM.Bytes != 2<<30 || l.Origin("ram.bytes").String() != "file "+p+":2" {
			t.Errorf("ram.bytes %v from %v", l.Node.RAM.Bytes, l.Origin("ram.bytes"))
		}
	})
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
		err  bool
	}{
		{"0", 0, false},
		{"4096", 4096, false},
		{"512MiB", 512 << 20, false},
		{"4GiB", 4 << 30, false},
		{"1.5GB", 1500000000, false},
		{"1.5GiB", 3 << 29, false},
		{"64 KiB", 64 << 10, false},
		{"  2gib ", 2 << 30, false},
		{"4G", 4 << 30, false},
		{"4g", 4 << 30, false},
		{"10KB", 10000, false},
		{"1TiB", 1 << 40, false},
		{"1e3", 1000, false},
		{"1e3KB", 1e6, false},
		{"2.5e-1KiB", 256, false},
		{"100B", 100, false},
		{".5KiB", 512, false},
		{"1.1B", 1, false}, // rounded to the byte
		{"0.5B", 1, false}, // half rounds up
		{"8EiB", 0, true},  // no exa units
		{"8191PiB", 8191 << 50, false},
		{"8192PiB", 0, true}, // overflows int64
		{"", 0, true},
		{"GiB", 0, true},
		{"-1", 0, true},
		{"+1", 0, true},
		{"1 2", 0, true},
		{"1Gbps", 0, true},
		{"1/2", 0, true},
		{"1e999", 0, true},
		{"0x10", 0, true},
		{"NaN", 0, true},
		{strings.Repeat("9", 41), 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		in   Size
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {256 << 10, "256.0 KiB"},
		{1 << 30, "1.0 GiB"}, {64 << 30, "64.0 GiB"}, {3 << 29, "1.5 GiB"}, {1 << 62, "4.0 EiB"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
	}
}

func TestParseBandwidth(t *testing.T) {
	tests := []struct {
		in   string
		want Bandwidth
		err  bool
	}{
		{"0", 0, false},
		{"off", 0, false},
		{"OFF", 0, false},
		{"1000", 1000, false},
		{"10Gbps", 1.25e9, false},
		{"100gbps", 12.5e9, false},
		{"800 Gbps", 1e11, false},
		{"8bps", 1, false},
		{"8Mbit/s", 1e6, false},
		{"24Gb/s", 3e9, false},
		{"1.25GB/s", 1.25e9, false},
		{"1.25GBps", 1.25e9, false},
		{"500MiB/s", 500 << 20, false},
		{"3KiB/s", 3072, false},
		{"2kB/s", 2000, false},
		{"1TB/s", 1e12, false},
		{"1B/s", 1, false},
		{"", 0, true},
		{"fast", 0, true},
		{"-1Gbps", 0, true},
		{"10Gbs", 0, true},
		{"10GB", 0, true}, // a size, not a rate
		{"10XB/s", 0, true},
		{"1e999", 0, true},
		{"10 G bps", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseBandwidth(tt.in)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("ParseBandwidth(%q) = %v, %v; want %v, error %v", tt.in, float64(got), err, float64(tt.want), tt.err)
		}
	}
}

func TestBandwidthString(t *testing.T) {
	tests := []struct {
		in   Bandwidth
		want string
	}{
		{0, "off"}, {1, "1 B/s"}, {1.25e9, "1.25 GB/s"}, {500 << 20, "524.29 MB/s"}, {12.5e9, "12.5 GB/s"}, {2e15, "2 PB/s"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Bandwidth(%v).String() = %q, want %q", float64(tt.in), got, tt.want)
		}
	}
}

const token = "s3cr3t-T0KEN-abcdefghijklmnop"

func TestTokenNeverPrinted(t *testing.T) {
	l := mustLoad(t, src("auth_token: "+token+"\nssd:\n  enabled: true\n  path: /d\n", nil, map[string]string{"auth-token": token}))
	if l.Node.AuthToken.Reveal() != token {
		t.Fatalf("token not loaded")
	}
	js, err := json.Marshal(l.Node)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "node", l.Node, "token", l.Node.AuthToken)
	outputs := map[string]string{
		"%v node":         fmt.Sprintf("%v", l.Node),
		"%+v node":        fmt.Sprintf("%+v", l.Node),
		"%#v node":        fmt.Sprintf("%#v", l.Node),
		"%s token":        fmt.Sprintf("%s", l.Node.AuthToken),
		"%q token":        fmt.Sprintf("%q", l.Node.AuthToken),
		"%x token":        fmt.Sprintf("%x", l.Node.AuthToken),
		"%+v loaded":      fmt.Sprintf("%+v", l),
		"%+v *loaded":     fmt.Sprintf("%+v", *l),
		"startup line":    l.StartupLine(),
		"warnings":        strings.Join(l.Warnings, "\n"),
		"json":            string(js),
		"slog":            logged.String(),
		"Fields defaults": fmt.Sprint(Fields()),
	}
	for name, out := range outputs {
		if strings.Contains(out, token) || strings.Contains(out, fmt.Sprintf("%x", token)) {
			t.Errorf("%s contains the token: %s", name, out)
		}
	}
	if !strings.Contains(outputs["%+v node"], "AuthToken:[redacted]") {
		t.Errorf("%%+v does not show the token as redacted: %s", outputs["%+v node"])
	}
	if !strings.Contains(outputs["warnings"], "auth_token was given as a flag") {
		t.Errorf("no warning about the token given as a flag: %q", l.Warnings)
	}
	if Secret("").String() != "" {
		t.Error("an empty secret does not print as empty")
	}
	// A bad token's error does not show it either.
	_, err = Load(src("", map[string]string{"KVPOOL_AUTH_TOKEN": "short tok"}, nil))
	if err == nil || strings.Contains(err.Error(), "short tok") {
		t.Errorf("error for a bad token = %v; want an error without the token", err)
	}
}

func TestStartupLine(t *testing.T) {
	tests := []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"defaults", "", nil,
			"kvpool node: RAM 1.0 GiB (default), objects up to 64.0 MiB (default); SSD offload: off (default); listen 127.0.0.1:7480"},
		{"brief example", "ssd:\n  enabled: true\n  bytes: 64GiB\n", map[string]string{"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": "/data/kv"},
			"kvpool node: RAM 1.0 GiB (default), objects up to 64.0 MiB (default); SSD /data/kv 64.0 GiB (file node.yaml, env MOONCAKE_OFFLOAD_FILE_STORAGE_PATH), sync batch; listen 127.0.0.1:7480"},
		{"explicitly off", "enable_ssd_offload: false\nram:\n  bytes: 4GiB\n", nil,
			"kvpool node: RAM 4.0 GiB (file node.yaml), objects up to 64.0 MiB (default); SSD offload: off (file node.yaml); listen 127.0.0.1:7480"},
		{"pacers, direct I/O and master", "ssd:\n  enabled: true\n  path: /d\n  direct_io: true\n  sync: always\nmaster: m:7470\n",
			map[string]string{"KVPOOL_PACERS_NET_EGRESS": "10Gbps", "KVPOOL_PACERS_SSD_READ": "500MiB/s"},
			"kvpool node: RAM 1.0 GiB (default), objects up to 64.0 MiB (default); SSD /d 1.0 GiB (file node.yaml, default), sync always, direct I/O; paced: net egress 1.25 GB/s (env KVPOOL_PACERS_NET_EGRESS), SSD read 524.29 MB/s (env KVPOOL_PACERS_SSD_READ); listen 127.0.0.1:7480; master m:7470"},
		{"max object above the RAM size", "ram:\n  bytes: 16MiB\nmax_object_bytes: 512MiB\n", nil,
			"kvpool node: RAM 16.0 MiB (file node.yaml), objects up to 14.4 MiB (what RAM keeps under ram.low_watermark, without SSD; max_object_bytes 512.0 MiB, file node.yaml); SSD offload: off (default); listen 127.0.0.1:7480"},
		{"max object above the RAM size, SSD on", "ram:\n  bytes: 16MiB\nmax_object_bytes: 512MiB\nssd:\n  enabled: true\n  path: /d\n", nil,
			"kvpool node: RAM 16.0 MiB (file node.yaml), objects up to 16.0 MiB (the RAM size; max_object_bytes 512.0 MiB, file node.yaml); SSD /d 1.0 GiB (file node.yaml, default), sync batch; listen 127.0.0.1:7480"},
		{"max object from env", "", map[string]string{"KVPOOL_MAX_OBJECT_BYTES": "1.5MiB"},
			"kvpool node: RAM 1.0 GiB (default), objects up to 1.5 MiB (env KVPOOL_MAX_OBJECT_BYTES); SSD offload: off (default); listen 127.0.0.1:7480"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustLoad(t, src(tt.file, tt.env, nil)).StartupLine(); got != tt.want {
				t.Errorf("StartupLine()\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestFieldsRoundTrip loads every field's default text through its flag:
// each must parse back to the default and be attributed to the flag.
func TestFieldsRoundTrip(t *testing.T) {
	fs := Fields()
	flags := make(map[string]string)
	seenEnv, seenFlag := map[string]bool{}, map[string]bool{}
	for _, f := range fs {
		if f.Env != "KVPOOL_"+strings.ToUpper(strings.ReplaceAll(f.Key, ".", "_")) || seenEnv[f.Env] {
			t.Errorf("field %s: env %s", f.Key, f.Env)
		}
		if seenFlag[f.Flag] || strings.ContainsAny(f.Flag, "._") {
			t.Errorf("field %s: flag %s", f.Key, f.Flag)
		}
		seenEnv[f.Env], seenFlag[f.Flag] = true, true
		if f.Usage == "" {
			t.Errorf("field %s has no usage", f.Key)
		}
		if f.Bool != (f.Key == "ssd.enabled" || f.Key == "ssd.direct_io") {
			t.Errorf("field %s: Bool = %v", f.Key, f.Bool)
		}
		flags[f.Flag] = f.Default
	}
	for _, env := range []string{"KVPOOL_RAM_BYTES", "KVPOOL_SSD_PATH", "KVPOOL_SSD_ENABLED", "KVPOOL_PROMOTION_MAX_PER_HEARTBEAT"} {
		if !seenEnv[env] {
			t.Errorf("no field reads %s", env)
		}
	}
	l := mustLoad(t, src("", nil, flags))
	if !reflect.DeepEqual(l.Node, Defaults()) {
		t.Errorf("defaults through flags = %+v, want %+v", l.Node, Defaults())
	}
	for _, f := range fs {
		if o := l.Origin(f.Key); o.Source != FromFlag || o.Name != f.Flag {
			t.Errorf("origin of %s = %v, want flag --%s", f.Key, o, f.Flag)
		}
	}
}

func TestEveryFieldFromEveryLayer(t *testing.T) {
	// A non-default valid value for every key, as text.
	values := map[string]string{
		"listen": "127.0.0.1:1", "admin_listen": "127.0.0.1:2", "resp_listen": "127.0.0.1:4", "resp_replicas": "2", "node_name": "n-1", "master": "m:3", "cluster_id": "c-1",
		"etcd": "http://e:2379", "heartbeat_interval": "2s", "block_size": "64KiB", "auth_token": token,
		"max_object_bytes": "32MiB", "ram.chunk_bytes": "8KiB",
		"ram.bytes": "2GiB", "ram.policy": "s3fifo+second-hit", "ram.high_watermark": "0.9", "ram.low_watermark": "0.8",
		"ssd.enabled": "true", "ssd.path": "/d", "ssd.bytes": "2GiB", "ssd.sync": "none",
		"ssd.high_watermark": "0.8", "ssd.low_watermark": "0.7", "ssd.direct_io": "false",
		"promotion.threshold": "3", "promotion.ram_watermark": "0.5", "promotion.queue_cap": "9", "promotion.max_per_heartbeat": "0",
		"pacers.net_egress": "1Gbps", "pacers.net_ingress": "2Gbps", "pacers.ssd_read": "1GB/s", "pacers.ssd_write": "1MiB/s",
		"quota.default_bytes": "1GiB",
		"tenant_tokens_file":  writeTokensFile(t, "alice alice-token-0123456789\n", 0o600),
		"shared_namespaces":   "public:alice; docs",
	}
	fs := Fields()
	if len(values) != len(fs) {
		t.Fatalf("test covers %d keys, there are %d fields", len(values), len(fs))
	}
	env, flags := map[string]string{}, map[string]string{}
	var file strings.Builder
	section := ""
	for _, f := range fs {
		env[f.Env] = values[f.Key]
		flags[f.Flag] = values[f.Key]
		sec, name, nested := strings.Cut(f.Key, ".")
		if !nested {
			fmt.Fprintf(&file, "%s: %q\n", f.Key, values[f.Key])
			continue
		}
		if sec != section {
			fmt.Fprintf(&file, "%s:\n", sec)
			section = sec
		}
		fmt.Fprintf(&file, "  %s: %q\n", name, values[f.Key])
	}
	layers := []struct {
		name   string
		s      Sources
		source Source
	}{
		{"file", src(file.String(), nil, nil), FromFile},
		{"env", src("", env, nil), FromEnv},
		{"flags", src("", nil, flags), FromFlag},
	}
	var want Node
	for i, layer := range layers {
		l := mustLoad(t, layer.s)
		if i == 0 {
			want = l.Node
			if reflect.DeepEqual(want, Defaults()) {
				t.Fatal("file values equal the defaults")
			}
		} else if !reflect.DeepEqual(l.Node, want) {
			t.Errorf("%s layer gives %+v, file gives %+v", layer.name, l.Node, want)
		}
		for _, f := range fs {
			if o := l.Origin(f.Key); o.Source != layer.source {
				t.Errorf("%s layer: origin of %s = %v", layer.name, f.Key, o)
			}
			if d := Defaults(); f.Key != "ssd.direct_io" && fieldText(t, f.Key, want) == fieldText(t, f.Key, d) {
				t.Errorf("value for %s equals its default; the test would not see it", f.Key)
			}
		}
	}
}

// fieldText shows key's value in n via the field table.
func fieldText(t *testing.T, key string, n Node) string {
	f, ok := findField(fields(), key)
	if !ok {
		t.Fatalf("no field %s", key)
	}
	if f.secret {
		return n.AuthToken.Reveal()
	}
	return f.show(&n)
}

func TestCheckSSDDir(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		path   string
		unsafe bool   // wraps ErrUnsafeSSDPath
		want   string // "" for success
	}{
		{"real directory", real, false, ""},
		{"not yet created", filepath.Join(real, "new"), false, ""},
		{"symlink", link, true, "symbolic link"},
		{"regular file", file, false, "not a directory"},
		{"relative", "data/kv", true, "not absolute"},
		{"dotdot", real + "/../real", true, `".." element`},
		{"empty", "", false, "empty"},
		{"nul", "/a\x00b", false, "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSSDDir(tt.path)
			if tt.want == "" {
				if err != nil {
					t.Errorf("CheckSSDDir(%q) = %v", tt.path, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckSSDDir(%q) = %v, want an error containing %q", tt.path, err, tt.want)
			}
			if errors.Is(err, ErrUnsafeSSDPath) != tt.unsafe {
				t.Errorf("CheckSSDDir(%q) = %v: errors.Is(ErrUnsafeSSDPath) = %v, want %v", tt.path, err, !tt.unsafe, tt.unsafe)
			}
		})
	}
	t.Run("lstat error", func(t *testing.T) {
		boom := errors.New("boom")
		err := checkSSDDir("/x", func(string) (fs.FileInfo, error) { return nil, boom })
		if !errors.Is(err, boom) {
			t.Errorf("checkSSDDir with a failing lstat = %v, want it wrapped", err)
		}
	})
}

func TestWorkDirDefaultsToCwd(t *testing.T) {
	s := src("", map[string]string{"KVPOOL_SSD_PATH": "kv", "KVPOOL_SSD_ENABLED": "1"}, nil)
	s.WorkDir = ""
	l := mustLoad(t, s)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "kv"); l.Node.SSD.Path != want {
		t.Errorf("ssd.path = %q, want %q", l.Node.SSD.Path, want)
	}
}

func TestOriginString(t *testing.T) {
	tests := []struct {
		o    Origin
		want string
	}{
		{Origin{Source: FromDefault}, "default"},
		{Origin{Source: FromFile, Name: "n.yaml", Line: 3}, "file n.yaml:3"},
		{Origin{Source: FromFile, Name: "n.yaml"}, "file n.yaml"},
		{Origin{Source: FromEnv, Name: "KVPOOL_X"}, "env KVPOOL_X"},
		{Origin{Source: FromFlag, Name: "x-y"}, "flag --x-y"},
		{Origin{}, "unknown"},
	}
	for _, tt := range tests {
		if got := tt.o.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.o, got, tt.want)
		}
	}
}

func TestHeartbeatDurationParsed(t *testing.T) {
	l := mustLoad(t, src("heartbeat_interval: 250ms\n", nil, nil))
	if l.Node.HeartbeatInterval != 250*time.Millisecond {
		t.Errorf("heartbeat_interval = %v", l.Node.HeartbeatInterval)
	}
}

// TestEffectiveMaxObject: the node takes max_object_bytes, or what its
// RAM tier keeps under the low watermark when less; never an object that
// would be evicted as soon as stored. A live run's RAM of
// replay.RAMSlotsFor(blocks) slots at a watermark of blocks/slots keeps
// exactly its blocks.
func TestEffectiveMaxObject(t *testing.T) {
	d := Defaults()
	if got := d.EffectiveMaxObject(); got != DefaultMaxObjectBytes {
		t.Errorf("defaults: %v, want %v", got, DefaultMaxObjectBytes)
	}
	n := Defaults()
	n.RAM.Bytes, n.RAM.ChunkBytes, n.RAM.LowWatermark = 1<<20, 4096, 0.9
	// floor(0.9 × 256 chunks) = 230 chunks.
	if got, want := n.EffectiveMaxObject(), Size(230*4096); got != want {
		t.Errorf("1 MiB RAM: %d, want %d", got, want)
	}
	n.RAM.HighWatermark = 1 // no trim: every chunk
	if got, want := n.EffectiveMaxObject(), Size(1<<20); got != want {
		t.Errorf("1 MiB RAM, high watermark 1: %d, want %d", got, want)
	}
	n.RAM.HighWatermark, n.SSD.Enabled = 0.95, true // larger than RAM keeps goes to SSD
	if got, want := n.EffectiveMaxObject(), Size(1<<20); got != want {
		t.Errorf("1 MiB RAM with SSD: %d, want %d", got, want)
	}
	n.SSD.Enabled = false
	n.MaxObjectBytes = 1000
	if got := n.EffectiveMaxObject(); got != 1000 {
		t.Errorf("max_object_bytes 1000: %d", got)
	}
	n = Defaults() // a live run: 1 block of 64 KiB in ceil(1/0.9) = 2 slots, watermarks 1/2
	n.RAM.Bytes, n.RAM.HighWatermark, n.RAM.LowWatermark = 2*64<<10, 0.5, 0.5
	if got := n.EffectiveMaxObject(); got != 64<<10 {
		t.Errorf("one-block live-run node: %d, want 65536", got)
	}
}
