package masterproto

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.hex and the FuzzDecode seed corpus")

const regenerate = "go test ./internal/master/masterproto -run 'TestGolden|TestSeedCorpus' -update"

// goldenNames are the samples whose exact bytes are pinned in
// testdata/golden: a format change shows up as a diff there.
// The cluster ID trailer of HELLO and its response came later: the
// "hello" golden predates it and must keep decoding (with no ID).
// Version 2 added names, sizes in PLACE and LOCATE: the *_named, place,
// locate and hello_v2 goldens; then KEYINFO, EXPIRE, SCAN and COUNT; then
// the term trailer of HELLO and its response (hello_follow, hello_reply_*),
// and the backlog flag of REGISTER and HEARTBEAT (*_backlog).
var goldenNames = []string{"lookup", "lookup_result", "hello", "hello_cluster", "hello_reply_cluster",
	"hello_v2", "place", "place_named", "exists_named", "locate", "locate_result", "query_named",
	"register_named", "heartbeat_named", "heartbeat_reply_named",
	"keyinfo", "keyinfo_result", "expire", "expire_result", "scan", "scan_result", "count", "count_result",
	"hello_follow", "hello_reply_term", "hello_reply_not_leader", "register_backlog", "heartbeat_backlog"}

func sampleNamed(t *testing.T, name string) sample {
	t.Helper()
	for _, s := range samples() {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no sample %q", name)
	return sample{}
}

// formatHex writes a frame as its header then the body in 16-byte lines.
func formatHex(comment string, b []byte) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# %s\n# regenerate: %s\n", comment, regenerate)
	fmt.Fprintf(&sb, "%s\n", hex.EncodeToString(b[:HeaderLen]))
	for i := HeaderLen; i < len(b); i += 16 {
		fmt.Fprintf(&sb, "%s\n", hex.EncodeToString(b[i:min(i+16, len(b))]))
	}
	return sb.String()
}

func parseHex(t *testing.T, text string) []byte {
	t.Helper()
	var out []byte
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		b, err := hex.DecodeString(line)
		if err != nil {
			t.Fatalf("golden line %q: %v", line, err)
		}
		out = append(out, b...)
	}
	return out
}

// TestGolden pins the encoding of a few frames byte for byte, and decodes
// the pinned bytes back to the sample.
func TestGolden(t *testing.T) {
	for _, name := range goldenNames {
		t.Run(name, func(t *testing.T) {
			s := sampleNamed(t, name)
			b, err := encode(nil, s)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", name+".hex")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(formatHex(fmt.Sprintf("%v frame, request %d (sample %q)", s.op, s.reqID, name), b)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run %s)", err, regenerate)
			}
			want := parseHex(t, string(text))
			if hex.EncodeToString(b) != hex.EncodeToString(want) {
				t.Fatalf("encoding changed:\n got %x\nwant %x\n(if intended, bump Version and run %s)", b, want, regenerate)
			}
			got, err := decode(ParseHeader(want), want[HeaderLen:], Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(exported(got)) != fmt.Sprint(exported(s.msg)) {
				t.Fatalf("golden decodes to %+v, want %+v", got, s.msg)
			}
		})
	}
}

// TestGoldenLookupLayout spells out the LOOKUP request layout by hand, so
// the documentation in doc.go and the encoder cannot drift apart.
func TestGoldenLookupLayout(t *testing.T) {
	b, err := AppendLookup(nil, 0x0102030405060708, &Lookup{Tenant: "ab", IDs: []uint64{0x1122334455667788}, Lease: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"20000000" + "04" + "00" + "0000" + "0807060504030201" + // header: len 32, LOOKUP, id
		"01" + // lease
		"02" + "6162" + // tenant "ab"
		"01000000" + "8877665544332211" // one id
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestSeedCorpus writes (with -update) and checks the FuzzDecode seeds:
// every sample frame, a pipelined stream of all of them, and a few
// malformed ones.
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	seeds := map[string][]byte{}
	var all []byte
	for _, s := range samples() {
		b, err := encode(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		seeds[s.name] = b
		all = append(all, b...)
	}
	seeds["stream"] = all
	for _, m := range malformedFrames(t) {
		seeds["bad_"+m.name] = m.frame
	}
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%v (run %s)", err, regenerate)
	}
	if len(entries) < len(seeds) {
		t.Fatalf("%d seeds in %s, want at least %d (run %s)", len(entries), dir, len(seeds), regenerate)
	}
}
