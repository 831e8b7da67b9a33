package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Link bounds, and the shaping parameters derived from a rate.
const (
	// minRate is the slowest shaped link: 64 KiB/s, below which one
	// block takes seconds and every timeout of the store fires.
	minRate = 64 << 10
	// maxRate is the fastest: 100 GB/s, far above what a veth carries.
	maxRate = 100e9
	// maxDelay bounds Link.Delay: 10 s.
	maxDelay = 10 * time.Second
	// burstWindow sizes a link's token bucket as the node pacers size theirs
	// (pacer.DefaultBurstWindow): 10 ms of the rate.
	burstWindow = 10 * time.Millisecond
	// minBurst is the smallest bucket: 64 KiB, one GSO packet, so a
	// slow link still passes the largest packet veth hands it whole.
	minBurst = 64 << 10
	// queueTime bounds the bytes a link queues, in time at its rate: 100
	// ms, a deep switch buffer; TCP backs off before it fills.
	queueTime = 100 * time.Millisecond
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

// shape sets dev's root qdisc in namespace ns to a link of rate bytes/s
// that its peers share fairly, with delay added to every packet:
//
//   - an HTB root class at the rate (its burst as the node pacers':
//     burstWindow of the rate, at least minBurst);
//   - one child class per peer, matched by the peer's address (match is
//     "dst" on a host's egress, "src" on its ingress), and one for anything
//     else (the gateway): each guaranteed an equal part of the rate and
//     allowed all of it, so two busy peers get half each, as behind a
//     switch port that queues fairly between the hosts it serves;
//   - under each, a byte FIFO of queueTime at the rate, or netem with the
//     delay.
//
// With rate 0 the link is unshaped (a lone netem with the delay, or the
// default qdisc). The commands go to one tc -batch.
func shape(ctx context.Context, ns, dev string, rate float64, delay time.Duration, match string, peers []netip.Addr) error {
	// Start from the default, so a change never stacks on the old tree.
	if err := run(ctx, "tc", "-n", ns, "qdisc", "del", "dev", dev, "root"); err != nil && !noQdisc(err) {
		return err
	}
	netem := ""
	if delay > 0 {
		netem = "netem delay " + strconv.FormatInt(max(1, delay.Microseconds()), 10) + "us"
	}
	if rate == 0 {
		if netem == "" {
			return nil
		}
		return netemErr(run(ctx, append([]string{"tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:"}, strings.Fields(netem)...)...))
	}
	bits := strconv.FormatInt(int64(math.Round(rate*8)), 10) + "bit"
	share := strconv.FormatInt(int64(math.Max(8, math.Round(rate*8/float64(len(peers)+1)))), 10) + "bit"
	burst := strconv.FormatInt(int64(max(rate*burstWindow.Seconds(), minBurst)), 10)
	queue := strconv.FormatInt(int64(max(rate*queueTime.Seconds(), 4*minBurst)), 10)
	leaf := "bfifo limit " + queue
	if netem != "" {
		leaf = netem + " limit " + strconv.Itoa(max(1000, int(rate*queueTime.Seconds()/1500)))
	}
	cmds := []string{
		"qdisc add dev " + dev + " root handle 1: htb default 2",
		"class add dev " + dev + " parent 1: classid 1:1 htb rate " + bits + " ceil " + bits + " burst " + burst + " cburst " + burst + " quantum " + quantum,
	}
	class := func(id int) {
		c := strconv.Itoa(id)
		cmds = append(cmds,
			"class add dev "+dev+" parent 1:1 classid 1:"+c+" htb rate "+share+" ceil "+bits+" burst "+burst+" cburst "+burst+" quantum "+quantum,
			"qdisc add dev "+dev+" parent 1:"+c+" handle "+c+": "+leaf)
	}
	class(2)
	for i, p := range peers {
		class(10 + i)
		cmds = append(cmds, "filter add dev "+dev+" parent 1: protocol ip prio 1 u32 match ip "+match+" "+p.String()+"/32 flowid 1:"+strconv.Itoa(10+i))
	}
	return netemErr(batch(ctx, ns, cmds))
}

// quantum is every HTB class's quantum in bytes: what it may send per
// round when classes borrow, above the largest packet veth hands a qdisc
// (a 64 KiB GSO packet) and under HTB's cap of 200,000.
const quantum = "100000"

// batch runs tc commands (without the leading "tc") in namespace ns, in
// one tc process.
func batch(ctx context.Context, ns string, cmds []string) error {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tc", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return &cmdError{args: []string{"tc", "-n", ns, "-batch", "(" + strconv.Itoa(len(cmds)) + " commands)"}, msg: msg, err: err}
	}
	return nil
}

// netemErr turns tc's refusal of an unknown netem qdisc into ErrNoNetem.
func netemErr(err error) error {
	var ce *cmdError
	if errors.As(err, &ce) && strings.Contains(ce.msg, "qdisc kind is unknown") {
		return ErrNoNetem
	}
	return err
}

// noQdisc reports whether a qdisc deletion failed only because there was
// nothing to delete.
func noQdisc(err error) bool {
	var ce *cmdError
	return errors.As(err, &ce) && (strings.Contains(ce.msg, "Cannot delete qdisc with handle of zero") ||
		strings.Contains(ce.msg, "No such file or directory") || strings.Contains(ce.msg, "Invalid handle"))
}
