package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// This file checks every subcommand's answer to bad flags: exit status 2
// and a message that names the flag and speaks no Go. The commands run
// in-process with a context that is already cancelled, so that a bad
// value wrongly accepted makes a command fail fast rather than start a
// cluster.

// subcommandPaths returns every subcommand as typed: main's table, with
// "trace" expanded into its own subcommands.
func subcommandPaths() []string {
	var paths []string
	for _, c := range commands() {
		if c.name == "trace" {
			for _, t := range traceCommands() {
				paths = append(paths, "trace "+t.name)
			}
			continue
		}
		paths = append(paths, c.name)
	}
	return paths
}

// runCancelled runs "kvpool path args..." with a cancelled context and
// returns the exit code and stderr.
func runCancelled(path string, args ...string) (int, string) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := run(ctx, append(strings.Fields(path), args...), &out, &errb)
	return code, errb.String()
}

// lastLine is the last non-empty line of s: the command's error message
// (the flag package prints the usage before it).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// goSpeak are substrings that betray a Go name in a message meant for a
// user of the command line.
var goSpeak = []string{"Options.", "Config.", "*", "github.com", "internal/", "main.", "[]string", "%!"}

// checkFlagMessage fails t unless msg names the flag (--name) and
// contains none of goSpeak.
func checkFlagMessage(t *testing.T, msg, flag string) {
	t.Helper()
	name := strings.TrimLeft(flag, "-")
	if !strings.Contains(msg, "--"+name) {
		t.Errorf("message does not name --%s: %s", name, msg)
	}
	for _, g := range goSpeak {
		if strings.Contains(msg, g) {
			t.Errorf("message contains %q: %s", g, msg)
		}
	}
}

// TestBadFlags runs every subcommand with bad flag values of every kind
// and checks exit status 2 and the message.
func TestBadFlags(t *testing.T) {
	cases := []struct {
		cmd  string
		args []string
		flag string // the flag the message must name
	}{
		{"demo", []string{"--nodes", "0"}, "--nodes"},
		{"demo", []string{"--ram-blocks", "-5"}, "--ram-blocks"},
		{"demo", []string{"--ram-blocks", "0"}, "--ram-blocks"},
		{"demo", []string{"--speed", "0"}, "--speed"},
		{"demo", []string{"--speed", "fast"}, "--speed"},
		{"demo", []string{"--payload", "lots"}, "--payload"},
		{"demo", []string{"--payload", "4"}, "--payload"},
		{"demo", []string{"--payload", "0"}, "--payload"},
		{"demo", []string{"--payload", "536870913"}, "--payload"},
		{"demo", []string{"--rate", "5000"}, "--rate"},
		{"demo", []string{"--window", "1us"}, "--window"},
		{"demo", []string{"--speed", "1e308"}, "--speed"},
		{"demo", []string{"--ram-blocks", "9223372036854775807"}, "--ram-blocks"},
		{"replay", []string{"--local", "2", "--speed", "1e308"}, "--speed"},
		{"replay", []string{"--local", "2", "--ram-blocks", "9223372036854775807"}, "--ram-blocks"},
		{"hitrate", []string{"--capacity", "-5"}, "--capacity"},
		{"hitrate", []string{"--capacity", "many"}, "--capacity"},
		{"hitrate", []string{"--nodes", "0"}, "--nodes"},
		{"hitrate", []string{"--routing", "nosuch"}, "--routing"},
		{"hitrate", []string{"--policy", "nosuch"}, "--policy"},
		{"hitrate", []string{"--sweep", "10,x"}, "--sweep"},
		{"sim", []string{"--ssd-blocks", "-10"}, "--ssd-blocks"},
		{"sim", []string{"--instances", "0"}, "--instances"},
		{"sim", []string{"--mode", "nosuch"}, "--mode"},
		{"sim", []string{"--routing", "nosuch"}, "--routing"},
		{"sim", []string{"--replication", "nosuch"}, "--replication"},
		{"sim", []string{"--hot-accesses", "1"}, "--hot-accesses"},
		{"sim", []string{"--policy", "nosuch"}, "--policy"},
		{"sim", []string{"--profile", "nosuch"}, "--profile"},
		{"sim", []string{"--nic-gbps", "NaN"}, "--nic-gbps"},
		{"sim", []string{"--slo", "+Inf"}, "--slo"},
		{"compare", []string{"--sim", "--nic-gbps", "0"}, "--nic-gbps"},
		{"compare", []string{"--sim", "--workers", "-1"}, "--workers"},
		{"compare", []string{"--validate", "--mode", "nosuch"}, "--mode"},
		{"compare", []string{"--validate", "--routing", "nosuch"}, "--routing"},
		{"compare", []string{"--validate", "--live-rate", "5000"}, "--live-rate"},
		{"compare", []string{"--validate", "--ram-blocks", "0"}, "--ram-blocks"},
		{"compare", []string{"--validate", "--policy", "nosuch"}, "--policy"},
		{"policy", []string{"--gen-requests", "-1"}, "--gen-requests"},
		{"policy", []string{"--workers", "x"}, "--workers"},
		{"master", []string{"--eviction-policy", "nosuch"}, "--eviction-policy"},
		{"master", []string{"--eviction-policy", "belady"}, "--eviction-policy"},
		{"master", []string{"--placement", "nosuch"}, "--placement"},
		{"master", []string{"--listen", "bogus"}, "--listen"},
		{"master", []string{"--listen", "127.0.0.1:99999"}, "--listen"},
		{"master", []string{"--admin-listen", "127.0.0.1:x"}, "--admin-listen"},
		{"master", []string{"--node-ttl", "0s"}, "--node-ttl"},
		{"master", []string{"--heartbeat", "5s", "--node-ttl", "2s"}, "--heartbeat"},
		{"master", []string{"--max-per-heartbeat", "0"}, "--max-per-heartbeat"},
		{"master", []string{"--cluster-id", "bad id!"}, "--cluster-id"},
		{"master", []string{"--etcd", "http://127.0.0.1:2379"}, "--etcd"},
		{"master", []string{"--etcd", "127.0.0.1:2379", "--cluster-id", "c"}, "--etcd"},
		{"master", []string{"--etcd", "http://127.0.0.1:2379,ftp://x:1", "--cluster-id", "c"}, "--etcd"},
		{"master", []string{"--election-ttl", "2500ms"}, "--election-ttl"},
		{"master", []string{"--election-ttl", "1s"}, "--election-ttl"},
		{"master", []string{"--election-ttl", "0s"}, "--election-ttl"},
		{"master", []string{"--advertise", "nohost"}, "--advertise"},
		{"master", []string{"--etcd", "http://127.0.0.1:2379", "--cluster-id", "c", "--listen", "0.0.0.0:7470", "--auth-token", "0123456789abcdef0123"}, "--advertise"},
		{"node", []string{"--etcd", "http://127.0.0.1:2379"}, "--etcd"},
		{"node", []string{"--etcd", "localhost:2379", "--cluster-id", "c"}, "--etcd"},
		{"node", []string{"--master", "127.0.0.1:7470,bogus"}, "--master"},
		{"node", []string{"--cluster-id", "bad id!"}, "--cluster-id"},
		{"node", []string{"--ram-bytes", "0"}, "--ram-bytes"},
		{"node", []string{"--ram-bytes", "-5"}, "--ram-bytes"},
		{"node", []string{"--ram-bytes", "9223372036854775807"}, "--ram-bytes"},
		{"node", []string{"--listen", "bogus"}, "--listen"},
		{"node", []string{"--listen", "127.0.0.1:99999"}, "--listen"},
		{"node", []string{"--ram-policy", "nosuch"}, "--ram-policy"},
		{"node", []string{"--max-object-bytes", "0"}, "--max-object-bytes"},
		{"node", []string{"--max-object-bytes", "1GiB"}, "--max-object-bytes"},
		{"node", []string{"--max-object-bytes", "lots"}, "--max-object-bytes"},
		{"node", []string{"--ram-chunk-bytes", "0"}, "--ram-chunk-bytes"},
		{"node", []string{"--ram-chunk-bytes", "3000"}, "--ram-chunk-bytes"},
		{"node", []string{"--ram-chunk-bytes", "-4KiB"}, "--ram-chunk-bytes"},
		{"node", []string{"--listen", "192.0.2.1:7480"}, "--listen"},
		{"master", []string{"--listen", "192.0.2.1:7470"}, "--listen"},
		{"up", []string{"--nodes", "0"}, "--nodes"},
		{"up", []string{"--masters", "0"}, "--masters"},
		{"up", []string{"--masters", "8"}, "--masters"},
		{"up", []string{"--masters", "3", "--election-ttl", "1500ms"}, "--election-ttl"},
		{"up", []string{"--nodes", "100"}, "--nodes"},
		{"up", []string{"--ram", "0"}, "--ram"},
		{"up", []string{"--ram", "lots"}, "--ram"},
		{"up", []string{"--block-size", "0"}, "--block-size"},
		{"up", []string{"--base-port", "65530"}, "--base-port"},
		{"up", []string{"--heartbeat", "-1s"}, "--heartbeat"},
		{"up", []string{"--block-size", "1GiB"}, "--block-size"},
		{"up", []string{"--max-object-bytes", "0"}, "--max-object-bytes"},
		{"up", []string{"--max-object-bytes", "-1"}, "--max-object-bytes"},
		{"up", []string{"--max-object-bytes", "536870913"}, "--max-object-bytes"},
		{"up", []string{"--max-object-bytes", "1.5GiB"}, "--max-object-bytes"},
		{"up", []string{"--max-object-bytes", "lots"}, "--max-object-bytes"},
		{"up", []string{"--ssd", "64KiB"}, "--ssd"},
		{"up", []string{"--heartbeat", "5s", "--node-ttl", "2s"}, "--heartbeat"},
		{"up", []string{"--heartbeat", "5s"}, "--heartbeat"},
		{"up", []string{"--node-ttl", "500ms"}, "--node-ttl"},
		{"up", []string{"--link-rate", "10MB/s"}, "--link-rate"},
		{"up", []string{"--link-delay", "1ms"}, "--link-rate"},
		{"up", []string{"--netns", "--link-rate", "fast"}, "--link-rate"},
		{"compare", []string{"--sim", "--net", "bogus"}, "--net"},
		{"ctl", []string{"--master", "bogus", "nodes"}, "--master"},
		{"ctl", []string{"--master", "127.0.0.1:7470,bogus", "leader"}, "--master"},
		{"ctl", []string{"--master", "127.0.0.1:0", "nodes"}, "--master"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "--timeout", "0s", "nodes"}, "--timeout"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "put", "--key", strings.Repeat("n", 1025), "f"}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "get", "--key", ""}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "get", "--key", "a", "--key", "b"}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "get", "--key", "a", "7"}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "get"}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "put", "--key", "a"}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "exists", "--key", "a", "--key", strings.Repeat("n", 2000)}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "exists", "0x1", "nope"}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "del"}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "query", "--key", "a", "--key", "b"}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "stat", "--key", "a"}, "--key"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "nodes", "--json"}, "--json"},
		{"ctl", []string{"--master", "127.0.0.1:7470", "stat", "--json=maybe"}, "--json"},
		{"bench", []string{"--target", "nosuch"}, "--target"},
		{"bench", []string{"--target", "ram", "--conns", "5000"}, "--conns"},
		{"bench", []string{"--target", "ram", "--conns", "-1"}, "--conns"},
		{"bench", []string{"--target", "ram", "--write-fraction", "2"}, "--write-fraction"},
		{"bench", []string{"--target", "ram", "--block", "0"}, "--block"},
		{"bench", []string{"--target", "cluster", "--nodes", "0"}, "--nodes"},
		{"bench", []string{"--vs", "nosuch"}, "--vs"},
		{"bench", []string{"--target", "cluster", "--link-rate", "5MB/s"}, "--link-rate"},
		{"bench", []string{"--target", "cluster", "--netns", "--link-rate", "slow"}, "--link-rate"},
		{"bench", []string{"--target", "master", "--named"}, "--named"},
		{"bench", []string{"--target", "master-index", "--keys", "0"}, "--keys"},
		{"bench", []string{"--target", "master-index", "--keys", "10X"}, "--keys"},
		{"bench", []string{"--target", "master-index", "--keys", "1.5"}, "--keys"},
		{"bench", []string{"--target", "master-index", "--keys", "2G"}, "--keys"},
		{"bench", []string{"--target", "master", "--keys", "1M"}, "--keys"},
		{"bench", []string{"--target", "master-index", "--depth", "2"}, "--depth"},
		{"bench", []string{"--vs", "tcp", "--block", "1GiB"}, "--block"},
		{"replay", []string{"--local", "-2"}, "--local"},
		{"replay", []string{"--local", "2", "--speed", "0"}, "--speed"},
		{"replay", []string{"--local", "2", "--mode", "nosuch"}, "--mode"},
		{"replay", []string{"--local", "2", "--routing", "joint"}, "--routing"},
		{"replay", []string{"--local", "2", "--prefill", "nosuch"}, "--prefill"},
		{"replay", []string{"--local", "2", "--verify", "nosuch"}, "--verify"},
		{"replay", []string{"--local", "2", "--policy", "nosuch"}, "--policy"},
		{"replay", []string{"--local", "2", "--payload", "4"}, "--payload"},
		{"replay", []string{"--local", "2", "--payload", "0"}, "--payload"},
		{"replay", []string{"--local", "2", "--ssd-blocks", "-1"}, "--ssd-blocks"},
		{"trace stats", []string{"--nosuch", "x.jsonl"}, "--nosuch"},
		{"trace sample", []string{"--from", "100", "--to", "50", "x.jsonl"}, "--to"},
		{"trace sample", []string{"--from", "-1", "x.jsonl"}, "--from"},
		{"trace sample", []string{"--families", "2", "x.jsonl"}, "--families"},
		{"trace sample", []string{"--scale", "0", "x.jsonl"}, "--scale"},
		{"trace sample", []string{"--seed", "-1", "x.jsonl"}, "--seed"},
		{"trace gen", []string{"--turns", "0.5"}, "--turns"},
		{"trace gen", []string{"--rate", "0"}, "--rate"},
		{"trace gen", []string{"--input-sigma", "9"}, "--input-sigma"},
		{"trace gen", []string{"--max-input", "1000"}, "--system-prompt-blocks"},
		{"trace gen", []string{"--system-prompt-blocks", "9223372036854775807"}, "--system-prompt-blocks"},
		{"trace fetch", []string{"--name", "nosuch"}, "--name"},
		{"trace fetch", []string{"--base-url", "ftp://x"}, "--base-url"},
		{"trace validate", []string{"--nosuch", "x.jsonl"}, "--nosuch"},
		{"version", []string{"--nosuch"}, "--nosuch"},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.cmd] = true
		t.Run(c.cmd+" "+strings.Join(c.args, " "), func(t *testing.T) {
			code, stderr := runCancelled(c.cmd, c.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr)
				return
			}
			checkFlagMessage(t, lastLine(stderr), c.flag)
			t.Log(lastLine(stderr))
		})
	}
	for _, p := range subcommandPaths() {
		if !covered[p] {
			t.Errorf("no bad-flag case for kvpool %s: add some", p)
		}
	}
}

// helpFlag is a flag as -h shows it: name, type and help text.
type helpFlag struct{ name, typ, help string }

// helpFlags parses the flags out of "kvpool path -h", checking that the
// help starts with the subcommand's own usage line, not Go's bare
// "Usage of".
func helpFlags(t *testing.T, path string) []helpFlag {
	t.Helper()
	code, stderr := runCancelled(path, "-h")
	if code != 0 {
		t.Fatalf("kvpool %s -h: exit %d\n%s", path, code, stderr)
	}
	if !strings.HasPrefix(stderr, "usage: kvpool "+path) || strings.Contains(stderr, "Usage of") {
		t.Errorf("kvpool %s -h does not start with its own usage line and description:\n%s", path, stderr)
	}
	head := regexp.MustCompile(`^  -(\S+)(?: (\S+))?$`)
	var flags []helpFlag
	for _, line := range strings.Split(stderr, "\n") {
		if m := head.FindStringSubmatch(line); m != nil {
			flags = append(flags, helpFlag{name: m[1], typ: m[2]})
		} else if strings.HasPrefix(line, "    \t") && len(flags) > 0 {
			flags[len(flags)-1].help += strings.TrimPrefix(line, "    \t") + " "
		}
	}
	return flags
}

// TestNumericFlagBounds checks every numeric flag of every subcommand,
// read from its -h: a negative value is refused with exit status 2,
// naming the flag; 0 is refused the same way unless the help says what
// 0 means. It also checks that no flag shows two defaults. Each run
// carries a stray argument, so that a value wrongly accepted ends in a
// different error (or a missing file), never in a run.
func TestNumericFlagBounds(t *testing.T) {
	mentionsZero := regexp.MustCompile(`(^|[^.\d])0([^.\d]|$)`)
	for _, path := range subcommandPaths() {
		for _, f := range helpFlags(t, path) {
			if strings.Count(f.help, "default") > 1 {
				t.Errorf("kvpool %s --%s shows two defaults: %s", path, f.name, f.help)
			}
			if !slices.Contains([]string{"int", "uint", "float", "duration"}, f.typ) {
				continue
			}
			negative, zero := "-1", "0"
			if f.typ == "duration" {
				negative, zero = "-1s", "0s"
			}
			t.Run(path+" --"+f.name+" "+negative, func(t *testing.T) {
				code, stderr := runCancelled(path, "--"+f.name, negative, "stray-argument.jsonl")
				if code != 2 {
					t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
				}
				checkFlagMessage(t, lastLine(stderr), f.name)
			})
			if mentionsZero.MatchString(f.help) {
				continue // 0 has a documented meaning
			}
			t.Run(path+" --"+f.name+" "+zero, func(t *testing.T) {
				code, stderr := runCancelled(path, "--"+f.name, zero, "stray-argument.jsonl")
				if code != 2 {
					t.Fatalf("exit %d, want 2 (0 is neither refused nor documented in the help: %q); stderr:\n%s", code, f.help, stderr)
				}
				checkFlagMessage(t, lastLine(stderr), f.name)
			})
		}
	}
}

// TestOptionFlagsExist checks that every flag optionFlags names is a flag
// of some subcommand, so that the table cannot point at a renamed flag.
func TestOptionFlagsExist(t *testing.T) {
	all := map[string]bool{}
	for _, path := range subcommandPaths() {
		for _, f := range helpFlags(t, path) {
			all[f.name] = true
		}
	}
	for field, flag := range optionFlags() {
		if !all[flag] {
			t.Errorf("optionFlags: %s → --%s, which no subcommand has", field, flag)
		}
	}
}

// TestSampleWindowTooLarge checks that a window bound past what
// milliseconds hold is refused as too large, not as negative.
func TestSampleWindowTooLarge(t *testing.T) {
	for _, f := range []string{"--from", "--to"} {
		code, stderr := runCancelled("trace sample", f, "1e308", "x.jsonl")
		msg := lastLine(stderr)
		if code != 2 || !strings.Contains(msg, f) || !strings.Contains(msg, "at most") {
			t.Errorf("trace sample %s 1e308: exit %d, %s; want exit 2 saying at most how many seconds", f, code, msg)
		}
	}
}

// TestFlagPackageMessagesDashDash checks that the parse errors the flag
// package prints itself, before the usage, name the flag as the user
// typed it ("--x"), like the usage error that follows them.
func TestFlagPackageMessagesDashDash(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "--no-such-flag"},
		{"sim", "--mode"},
		{"hitrate", "--capacity=x"},
	} {
		code, _, stderr := runKV(t, args...)
		if code != 2 {
			t.Errorf("kvpool %v: exit %d, want 2", args, code)
		}
		flagName := strings.TrimPrefix(strings.SplitN(args[1], "=", 2)[0], "--")
		if !strings.Contains(stderr, "--"+flagName) {
			t.Errorf("kvpool %v: stderr does not name --%s:\n%s", args, flagName, stderr)
		}
		for _, line := range strings.Split(stderr, "\n") {
			// The usage's flag list (indented) is the flag package's own.
			if !strings.HasPrefix(line, " ") && strings.Contains(line, " -"+flagName) {
				t.Errorf("kvpool %v: a message names the flag with one dash: %q", args, line)
			}
		}
	}
}
