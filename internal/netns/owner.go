package netns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/procid"
)

// Where namespaces and owner files live. ip netns add mounts a namespace
// at nsDir/<name>; a Net's owner file is ownerDir/<N>.json. Both are on
// /run, a tmpfs: they go with a reboot, as the namespaces do.
const (
	nsDir    = "/run/netns"
	ownerDir = "/run/kvpool-netns"
)

// claimGrace is how long an owner file that does not parse is taken for
// one its claimer is still writing: a minute, far longer than the write.
const claimGrace = time.Minute

// owner is an owner file's content: the process that made the Net.
type owner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// claim takes a free Net number: one whose subnet no address of the root
// namespace overlaps, whose switch namespace does not exist, and whose
// owner file it creates first (O_EXCL: two processes never take one
// number). Call it with the lock held (locked).
func claim() (*Net, error) {
	if err := os.MkdirAll(ownerDir, 0o700); err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	used, err := rootPrefixes()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(owner{PID: os.Getpid(), Start: procid.Start(os.Getpid())})
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	// A random start spreads concurrent claimers (parallel test
	// packages) so that most take their first try.
	first := rand.IntN(maxNets)
	for i := range maxNets {
		num := (first + i) % maxNets
		n := newNet(num, filepath.Join(ownerDir, strconv.Itoa(num)+".json"))
		if slices.ContainsFunc(used, n.Prefix.Overlaps) || nsExists(n.switchNS()) {
			continue
		}
		f, err := os.OpenFile(n.owner, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("netns: %w", err)
		}
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(n.owner)
			return nil, fmt.Errorf("netns: write %s: %w", n.owner, err)
		}
		return n, nil
	}
	return nil, fmt.Errorf("netns: all %d subnets of 10.213.0.0/16 are taken (by other kvpool nets, listed in %s, or by this machine's routes)", maxNets, ownerDir)
}

// rootPrefixes returns the subnets of the root namespace's addresses.
func rootPrefixes() ([]netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("netns: list this machine's addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// nsExists reports whether namespace name exists.
func nsExists(name string) bool {
	_, err := os.Stat(filepath.Join(nsDir, name))
	return err == nil
}

// nets returns the numbers of the Nets that have a namespace.
func nets() []int {
	ents, _ := os.ReadDir(nsDir)
	var out []int
	for _, e := range ents {
		if num, ok := netOf(e.Name()); ok && !slices.Contains(out, num) {
			out = append(out, num)
		}
	}
	return out
}

// netOf returns the Net number of namespace name (kvp<N>-…).
func netOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	num, err := strconv.Atoi(digits)
	if !ok || err != nil || num < 0 || num >= maxNets || strconv.Itoa(num) != digits {
		return 0, false
	}
	return num, true
}

// lockFile serialises cleaning and claiming between processes (flock).
const lockFile = ".lock"

// locked runs f holding the lock of ownerDir, so that no two processes
// clean the same dead owner's Net at once, and none cleans a number while
// another claims it.
func locked(f func() error) error {
	if err := os.MkdirAll(ownerDir, 0o700); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(ownerDir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	defer lf.Close() // releases the lock
	if err := flock(lf); err != nil {
		return fmt.Errorf("netns: lock %s: %w", lf.Name(), err)
	}
	return f()
}

// CleanStale removes every Net whose owner is gone, or whose namespaces
// have no owner file (left by a crash in the middle of New or Close), and
// returns what it removed. Nets of live owners are left alone.
func CleanStale() ([]string, error) {
	var removed []string
	err := locked(func() error {
		var err error
		removed, err = cleanStale()
		return err
	})
	return removed, err
}

// cleanStale is CleanStale, with the lock held.
func cleanStale() ([]string, error) {
	var removed []string
	var first error
	nums := nets()
	if ents, err := os.ReadDir(ownerDir); err == nil {
		for _, e := range ents {
			if num, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json")); err == nil && !slices.Contains(nums, num) {
				nums = append(nums, num)
			}
		}
	}
	for _, num := range nums {
		path := filepath.Join(ownerDir, strconv.Itoa(num)+".json")
		b, err := os.ReadFile(path)
		if err == nil {
			var o owner
			if json.Unmarshal(b, &o) != nil {
				// Being written by a claimer (created, not yet filled), or
				// damaged: left alone unless it has been so for a while.
				if st, err := os.Stat(path); err != nil || time.Since(st.ModTime()) < claimGrace {
					continue
				}
			} else if !procid.Gone(o.PID, o.Start) {
				continue
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			continue // unreadable: not ours to judge
		}
		if err := remove(num, path); err != nil && first == nil {
			first = err
		}
		removed = append(removed, fmt.Sprintf("%s%d (10.213.%d.0/24)", prefix, num, num))
	}
	return removed, first
}

// remove deletes Net num's gateway and namespaces, then its owner file.
func remove(num int, ownerPath string) error {
	ctx := context.Background()
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	// The gateway first and by name: a namespace's deletion is finished
	// by the kernel later, and the root end of its veth would linger.
	gw := prefix + strconv.Itoa(num) + "gw"
	if _, err := net.InterfaceByName(gw); err == nil {
		keep(gone(run(ctx, "ip", "link", "del", gw)))
	}
	ents, _ := os.ReadDir(nsDir)
	for _, e := range ents {
		if n, ok := netOf(e.Name()); ok && n == num {
			keep(gone(run(ctx, "ip", "netns", "del", e.Name())))
		}
	}
	if first == nil {
		if err := os.Remove(ownerPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			first = fmt.Errorf("netns: %w", err)
		}
	}
	return first
}

// Leftovers lists what Nets of this machine exist now: namespaces named
// kvp<N>-…, gateways kvp<N>gw and owner files, whoever owns them. A test
// suite that closed every Net it made expects none of its own.
func Leftovers() []string {
	var out []string
	ents, _ := os.ReadDir(nsDir)
	for _, e := range ents {
		if _, ok := netOf(e.Name()); ok {
			out = append(out, "namespace "+e.Name())
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, prefix) && strings.HasSuffix(i.Name, "gw") {
			out = append(out, "link "+i.Name)
		}
	}
	owners, _ := os.ReadDir(ownerDir)
	for _, e := range owners {
		if strings.HasSuffix(e.Name(), ".json") {
			out = append(out, "owner file "+filepath.Join(ownerDir, e.Name()))
		}
	}
	return out
}

// Owned lists the Nets this process owns now, by their owner files: a
// test binary that closed every Net it made has none when it ends.
func Owned() []string {
	var out []string
	ents, _ := os.ReadDir(ownerDir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(ownerDir, e.Name()))
		var o owner
		if err == nil && json.Unmarshal(b, &o) == nil && o.PID == os.Getpid() {
			out = append(out, prefix+strings.TrimSuffix(e.Name(), ".json"))
		}
	}
	return out
}

// gone is err, or nil when it only says that what was to be deleted is
// already gone (another cleaner, or the kernel, was first).
func gone(err error) error {
	var ce *cmdError
	if errors.As(err, &ce) && (strings.Contains(ce.msg, "No such file or directory") || strings.Contains(ce.msg, "Cannot find device")) {
		return nil
	}
	return err
}
