package wire

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/block"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.hex and the FuzzDecode seed corpus")

const regenerate = "go test ./internal/node/wire -run 'TestGolden|TestSeedCorpus' -update"

// goldenFrames are the frames whose exact bytes are pinned in
// testdata/golden: a format change shows up as a diff there.
func goldenFrames() []sample {
	return []sample{
		{"get", Frame{Header: Header{Op: OpGet, ReqID: 1}, IDs: []uint64{0x0123456789abcdef}}},
		{"mget", Frame{Header: Header{Op: OpMGet, ReqID: 2}, IDs: []uint64{1, 2, 3}}},
		{"put", Frame{Header: Header{Op: OpPut, ReqID: 3}, Blocks: []Block{okBlock(42, 8)}}},
		{"mget_response", Frame{Header: Header{Op: OpMGetResponse, ReqID: 4},
			Blocks: []Block{okBlock(1, 4), {ID: 2, Code: CodeNotFound}, okBlock(3, 0)}}},
		{"exists_response", Frame{Header: Header{Op: OpExistsResponse, ReqID: 5},
			Statuses: []Status{{ID: 1, Code: CodeOK}, {ID: 2, Code: CodeNotFound}}}},
		{"stats_response", Frame{Header: Header{Op: OpStatsResponse, ReqID: 6},
			Tiers: sampleTiers()[:1]}},
		{"error", Frame{Header: Header{Op: OpError, ReqID: 7}, Code: CodeUnsupportedOp, Message: "op 0x08"}},
		{"access", Frame{Header: Header{Op: OpAccess, ReqID: 8},
			Hints:  []Hint{{Touch: true}, {Hint: block.Hint{Depth: 1, Parent: 0x11}}},
			Blocks: []Block{{ID: 0x11, Code: CodeOK}, okBlock(0x12, 4)}}},
		{"get_named", Frame{Header: Header{Op: OpGetNamed, ReqID: 10}, Names: []string{"model@0@kv"}}},
		{"mget_named", Frame{Header: Header{Op: OpMGetNamed, ReqID: 11}, Names: []string{"a", "b\x00c"}}},
		{"put_named", Frame{Header: Header{Op: OpPutNamed, ReqID: 12}, Names: []string{"model@0@meta"}, Blocks: []Block{okNamed("model@0@meta", 28)}}},
		{"mput_named", Frame{Header: Header{Op: OpMPutNamed, ReqID: 13}, Names: []string{"x", "yz"}, Blocks: []Block{okNamed("x", 2), okNamed("yz", 0)}}},
		{"exists_named", Frame{Header: Header{Op: OpExistsNamed, ReqID: 14}, Names: []string{"a", "b"}}},
		{"delete_named", Frame{Header: Header{Op: OpDeleteNamed, ReqID: 15}, Names: []string{"model@0@kv"}}},
		{"get_named_response", Frame{Header: Header{Op: OpGetNamedResponse, ReqID: 16}, Blocks: []Block{okNamed("model@0@kv", 5)}}},
		{"mget_named_response", Frame{Header: Header{Op: OpMGetNamedResponse, ReqID: 17},
			Blocks: []Block{okNamed("a", 1), {ID: block.NameID("b\x00c"), Code: CodeNotFound}}}},
		{"put_named_response", Frame{Header: Header{Op: OpPutNamedResponse, ReqID: 18}, Statuses: []Status{{ID: block.NameID("model@0@meta"), Code: CodeOK}}}},
		{"mput_named_response", Frame{Header: Header{Op: OpMPutNamedResponse, ReqID: 19},
			Statuses: []Status{{ID: block.NameID("x"), Code: CodeOK}, {ID: block.NameID("yz"), Code: CodeTooLarge}}}},
		{"exists_named_response", Frame{Header: Header{Op: OpExistsNamedResponse, ReqID: 20},
			Statuses: []Status{{ID: block.NameID("a"), Code: CodeOK}, {ID: block.NameID("b"), Code: CodeNotFound}}}},
		{"delete_named_response", Frame{Header: Header{Op: OpDeleteNamedResponse, ReqID: 21}, Statuses: []Status{{ID: block.NameID("model@0@kv"), Code: CodeNotFound}}}},
		{"sync", Frame{Header: Header{Op: OpSync, ReqID: 22}}},
		{"sync_response", Frame{Header: Header{Op: OpSyncResponse, ReqID: 23}, Statuses: []Status{{Code: CodeUnavailable}}}},
		{"access_response", Frame{Header: Header{Op: OpAccessResponse, ReqID: 9},
			Statuses: []Status{{ID: 0x11, Code: CodeNotFound}, {ID: 0x12, Code: CodeOK}}}},
	}
}

type handshake struct {
	comment string
	b       []byte
}

func goldenHandshakes(t *testing.T) map[string]handshake {
	hello, err := AppendHello(nil, &Hello{Tenant: testTenant, Token: []byte("tok")})
	if err != nil {
		t.Fatal(err)
	}
	ack := HelloAckFor(nil, Limits{})
	return map[string]handshake{
		"hello":     {"hello, tenant " + strconv.Quote(testTenant) + ", token \"tok\"", hello},
		"hello_ack": {"hello-ack accepting, default limits", AppendHelloAck(nil, &ack)},
	}
}

// formatHex writes b as hex, 16 bytes a line, under a comment.
func formatHex(comment string, b []byte) []byte {
	var out bytes.Buffer
	fmt.Fprintf(&out, "# %s\n# regenerate: %s\n", comment, regenerate)
	for len(b) > 0 {
		n := min(16, len(b))
		for i, c := range b[:n] {
			if i > 0 {
				out.WriteByte(' ')
			}
			fmt.Fprintf(&out, "%02x", c)
		}
		out.WriteByte('\n')
		b = b[n:]
	}
	return out.Bytes()
}

// parseHex reads formatHex's output: hex digits, whitespace, # comments.
func parseHex(text []byte) ([]byte, error) {
	var digits strings.Builder
	for line := range strings.Lines(string(text)) {
		line, _, _ = strings.Cut(line, "#")
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	return hex.DecodeString(digits.String())
}

func checkGolden(t *testing.T, name, comment string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".hex")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, formatHex(comment, got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run %s)", err, regenerate)
	}
	want, err := parseHex(text)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: encoding changed (a protocol change needs a new Version; then run %s)\ngot  %x\nwant %x", path, regenerate, got, want)
	}
	return want
}

func TestGolden(t *testing.T) {
	for _, s := range goldenFrames() {
		t.Run(s.name, func(t *testing.T) {
			want := checkGolden(t, s.name, fmt.Sprintf("%v frame, request %d", s.f.Header.Op, s.f.Header.ReqID), mustEncode(t, &s.f))
			var got Frame
			if err := newReader(t, want, Limits{}).ReadFrame(&got); err != nil {
				t.Fatal(err)
			}
			if d := diffFrames(&s.f, &got); d != "" {
				t.Fatal(d)
			}
		})
	}
	hs := goldenHandshakes(t)
	for _, name := range slices.Sorted(maps.Keys(hs)) {
		t.Run(name, func(t *testing.T) {
			want := checkGolden(t, name, hs[name].comment, hs[name].b)
			r := newReader(t, want, Limits{})
			var err error
			if name == "hello" {
				var h Hello
				err = r.ReadHello(&h)
			} else {
				var a HelloAck
				if err = r.ReadHelloAck(&a); err == nil {
					err = a.Err()
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
