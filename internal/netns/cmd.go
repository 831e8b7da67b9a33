package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Link bounds, and the tbf parameters derived from a rate.
const (
	// minRate is the slowest shaped link: 64 KiB/s, below which one
	// block takes seconds and every timeout of the store fires.
	minRate = 64 << 10
	// maxRate is the fastest: 100 GB/s, far above what a veth carries.
	maxRate = 100e9
	// maxDelay bounds Link.Delay: 10 s.
	maxDelay = 10 * time.Second
	// burstWindow sizes tbf's bucket as the node pacers size theirs
	// (pacer.DefaultBurstWindow): 10 ms of the rate.
	burstWindow = 10 * time.Millisecond
	// minBurst is the smallest bucket: 64 KiB, one GSO packet, so a
	// slow link still passes the largest packet veth hands it whole.
	minBurst = 64 << 10
	// queueTime bounds the packets tbf queues, in time at the rate: 100
	// ms, a deep switch buffer; TCP backs off before it fills.
	queueTime = "100ms"
)

// ErrNoNetem says the kernel has no netem qdisc, so a link delay cannot
// be enforced (CONFIG_NET_SCH_NETEM is not set in some VM kernels).
var ErrNoNetem = errors.New("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so a link delay cannot be enforced")

// Available reports why this machine cannot make a Net, or nil: Linux,
// root, and iproute2's ip and tc on PATH.
func Available() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("netns: network namespaces need Linux (this is %s)", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("netns: network namespaces need root (running as uid %d)", os.Geteuid())
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netns: %s is not on PATH (Debian: apt-get install iproute2)", tool)
		}
	}
	return nil
}

// run runs one ip or tc command, bounded by cmdTimeout; its error names
// the command and says what it printed.
func run(ctx context.Context, args ...string) error {
	_, err := output(ctx, args...)
	return err
}

// output runs one command and returns what it printed on stdout.
func output(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, &cmdError{args: args, msg: msg, err: err}
	}
	return stdout.Bytes(), nil
}

// cmdError is a command that failed.
type cmdError struct {
	args []string
	msg  string
	err  error
}

func (e *cmdError) Error() string { return strings.Join(e.args, " ") + ": " + e.msg }
func (e *cmdError) Unwrap() error { return e.err }

// shape sets dev's root qdisc in namespace ns: tbf at rate (bytes/s) with
// netem delay inside it, either alone, or none (the default qdisc) when
// both are 0.
func shape(ctx context.Context, ns, dev string, rate float64, delay time.Duration) error {
	// Start from the default, so a change never stacks on the old tree.
	if err := run(ctx, "tc", "-n", ns, "qdisc", "del", "dev", dev, "root"); err != nil && !noQdisc(err) {
		return err
	}
	parent := []string{"root"}
	if rate > 0 {
		bits := strconv.FormatInt(int64(math.Round(rate*8)), 10) + "bit"
		burst := strconv.FormatInt(int64(max(rate*burstWindow.Seconds(), minBurst)), 10)
		if err := run(ctx, "tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf",
			"rate", bits, "burst", burst, "latency", queueTime); err != nil {
			return err
		}
		parent = []string{"parent", "1:1"}
	}
	if delay > 0 {
		args := append([]string{"tc", "-n", ns, "qdisc", "add", "dev", dev}, parent...)
		args = append(args, "handle", "10:", "netem", "delay", strconv.FormatInt(delay.Microseconds(), 10)+"us")
		if err := run(ctx, args...); err != nil {
			var ce *cmdError
			if errors.As(err, &ce) && strings.Contains(ce.msg, "qdisc kind is unknown") {
				return ErrNoNetem
			}
			return err
		}
	}
	return nil
}

// noQdisc reports whether a qdisc deletion failed only because there was
// nothing to delete.
func noQdisc(err error) bool {
	var ce *cmdError
	return errors.As(err, &ce) && (strings.Contains(ce.msg, "Cannot delete qdisc with handle of zero") ||
		strings.Contains(ce.msg, "No such file or directory") || strings.Contains(ce.msg, "Invalid handle"))
}
