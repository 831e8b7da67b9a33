package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path of the kvpool module.
const module = "github.com/kvpool/kvpool"

// forbidden lists the import path prefixes no lab package may import
// directly: the node and master sides, their protocols and servers, the
// tiers and the filesystem layer. A path matches a prefix when it equals
// it or lies under it.
var forbidden = []string{
	module + "/internal/node",
	module + "/internal/master",
	module + "/internal/frame",
	module + "/internal/server",
	module + "/internal/tier",
	module + "/internal/vfs",
}

// listedPackage is the part of `go list -json` output the rule reads.
type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// under reports whether path is prefix or lies under it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// violations returns one line per forbidden direct import of p, naming
// the package, the import and whether it comes from p's tests.
func violations(p listedPackage) []string {
	var out []string
	check := func(imports []string, where string) {
		for _, imp := range imports {
			for _, f := range forbidden {
				if under(imp, f) {
					out = append(out, p.ImportPath+" ("+where+") imports "+imp)
					break
				}
			}
		}
	}
	check(p.Imports, "code")
	check(p.TestImports, "tests")
	check(p.XTestImports, "external tests")
	return out
}

// TestLabImports is the rule of the package comment as a test: it lists
// every package under internal/lab with `go list` and fails naming each
// lab package that directly imports a forbidden package (in its code or
// its tests). Forbidden packages reached only through the client or the
// cluster harness are fine; the rule is about what a lab package names.
func TestLabImports(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		// go test puts its own go command first on the PATH.
		t.Fatalf("the go tool is not on PATH (%v): cannot list the lab packages' imports", err)
	}
	cmd := exec.Command(gotool, "list", "-test=false", "-json", module+"/internal/lab/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list the lab packages: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var pkgs []listedPackage
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 2 {
		t.Fatalf("go list found %d lab packages; want every package under internal/lab", len(pkgs))
	}
	for _, p := range pkgs {
		for _, v := range violations(p) {
			t.Errorf("%s: a lab package reaches the store only through the client and the cluster harness", v)
		}
	}
}

// TestViolations checks the rule itself on made-up packages: a direct
// import of a forbidden package or of one under it is reported, in code
// and in tests; the client, block, trace, the root package, payload and
// other lab packages are not, nor is a test's use of the cluster harness.
func TestViolations(t *testing.T) {
	p := listedPackage{
		ImportPath: module + "/internal/lab/x",
		Imports: []string{
			module, module + "/client", module + "/block", module + "/trace",
			module + "/internal/payload", module + "/internal/policy", module + "/internal/lab/sim",
			module + "/internal/tier/ram", module + "/internal/nodes", // a sibling name, not under internal/node
		},
		TestImports:  []string{module + "/internal/node/wire", module + "/internal/cluster"},
		XTestImports: []string{module + "/internal/master"},
	}
	got := violations(p)
	want := []string{
		p.ImportPath + " (code) imports " + module + "/internal/tier/ram",
		p.ImportPath + " (tests) imports " + module + "/internal/node/wire",
		p.ImportPath + " (external tests) imports " + module + "/internal/master",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
