package compare

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/lab/report"
	"github.com/kvpool/kvpool/internal/lab/sim"
)

func smallJoint(workers int, tr ...Trace) JointOptions {
	arms := JointArms()
	// The baseline, one ablation, one "ours" and one unbounded arm keep
	// the test fast.
	return JointOptions{Traces: tr, Arms: []JointArm{arms[0], arms[1], arms[6], arms[8]}, Instances: 3, RAMBlocks: 60, Workers: workers}
}

func TestRunJoint(t *testing.T) {
	tr := smallTrace(t, 3)
	res, err := RunJoint(context.Background(), smallJoint(2, tr))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 4 || len(res.Ceilings) != 1 || res.SLOSeconds != sim.DefaultSLOSeconds {
		t.Fatalf("%d rows, %d ceilings, SLO %g", len(res.Rows), len(res.Ceilings), res.SLOSeconds)
	}
	b := res.Baseline("gen")
	if b == nil || b.Ratio != 1 || b.ReqPerSec <= 0 {
		t.Fatalf("baseline row %+v: want ratio 1 and a positive goodput", b)
	}
	c := res.Ceiling("gen")
	for _, row := range res.Rows {
		if row.AtBaseline.RateMultiplier != b.Multiplier {
			t.Errorf("%s ran at ×%g, want the baseline's goodput ×%g", row.Arm.Name, row.AtBaseline.RateMultiplier, b.Multiplier)
		}
		if row.AtTraceRate.RateMultiplier != 1 || row.AtTraceRate.Served == 0 {
			t.Errorf("%s: trace-rate run at ×%g served %d", row.Arm.Name, row.AtTraceRate.RateMultiplier, row.AtTraceRate.Served)
		}
		if row.ReqPerSec > c.ReqPerSec*(1+1e-9) {
			t.Errorf("%s: goodput %g above the pooled ceiling %g", row.Arm.Name, row.ReqPerSec, c.ReqPerSec)
		}
		if row.AtBaseline.TokenHitRatio > c.TokenHitRatio+1e-12 {
			t.Errorf("%s: hit ratio %g above the ceiling's %g", row.Arm.Name, row.AtBaseline.TokenHitRatio, c.TokenHitRatio)
		}
		if want := row.ReqPerSec / b.ReqPerSec; !near2(row.Ratio, want) {
			t.Errorf("%s: ratio %g, want %g", row.Arm.Name, row.Ratio, want)
		}
	}
	if !(c.ShortestFirstReqPerSec >= c.ReqPerSec) || !near2(c.ShortestFirstRatio, c.ShortestFirstReqPerSec/b.ReqPerSec) {
		t.Errorf("ceiling %+v: shortest first below FIFO or ratio wrong", c)
	}
	unb := res.Rows[3]
	if !unb.Arm.Unbounded || unb.AtBaseline.RAMBlocks < distinctBlocks(tr.Requests) || unb.AtBaseline.NICGbps != unboundedNICGbps {
		t.Errorf("unbounded arm ran with %d blocks at %g Gbps", unb.AtBaseline.RAMBlocks, unb.AtBaseline.NICGbps)
	}
	if o := res.Ours("gen"); o == nil || !o.Arm.Ours {
		t.Errorf("ours = %+v, want the arm marked Ours", o)
	}
	if got := res.Rows[1].AtBaseline.Routing; got != sim.RoutingJoint {
		t.Errorf("joint arm ran with routing %q", got)
	}

	sec := res.Section()
	rep := &report.Report{Title: "joint", Sections: []report.Section{sec}}
	if err := rep.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := rep.CheckNumberFormats(); err != nil {
		t.Error(err)
	}
	if len(sec.Tables) != 2 || len(sec.Tables[0].Rows) != 1 || len(sec.Tables[1].Rows) != 6 {
		t.Fatalf("tables %d, verdict rows %d, arm rows %d; want 2, 1, 6 (4 arms + 2 ceilings)",
			len(sec.Tables), len(sec.Tables[0].Rows), len(sec.Tables[1].Rows))
	}
	dir := t.TempDir()
	if err := report.Write(dir, rep); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pooled ceiling", "baseline: mooncake + cache-aware", "target reachable"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}

	// The result does not depend on the number of workers.
	one, err := RunJoint(context.Background(), smallJoint(1, tr))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one, res) {
		t.Error("results with 1 and 2 workers differ")
	}
}

// TestRunJointReject checks the comparison with Algorithm 1's rejection:
// every arm runs with it, the ceiling rejects too (and bounds every arm),
// and the report says so without a shortest-first row.
func TestRunJointReject(t *testing.T) {
	tr := smallTrace(t, 3)
	o := smallJoint(2, tr)
	o.Reject = true
	res, err := RunJoint(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := RunJoint(context.Background(), smallJoint(2, tr))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Reject || plain.Reject {
		t.Fatalf("Reject recorded as %v (with) and %v (without)", res.Reject, plain.Reject)
	}
	c := res.Ceiling("gen")
	if c.ShortestFirstReqPerSec != 0 || c.ReqPerSec < plain.Ceiling("gen").ReqPerSec {
		t.Errorf("ceiling with rejection %+v: want no shortest-first figure and at least the FIFO ceiling %g",
			c, plain.Ceiling("gen").ReqPerSec)
	}
	for _, row := range res.Rows {
		if !row.AtBaseline.Reject || !row.AtTraceRate.Reject {
			t.Errorf("%s ran without rejection", row.Arm.Name)
		}
		if row.ReqPerSec > c.ReqPerSec*(1+1e-9) {
			t.Errorf("%s: goodput %g above the ceiling with rejection %g", row.Arm.Name, row.ReqPerSec, c.ReqPerSec)
		}
	}
	sec := res.Section()
	if !strings.Contains(sec.Title, "rejection") || len(sec.Tables) != 2 || len(sec.Tables[1].Rows) != 5 {
		t.Fatalf("section %q with %d tables: want the rejection title and 5 arm rows (4 arms + 1 ceiling)", sec.Title, len(sec.Tables))
	}
	if last := sec.Tables[1].Rows[4][1]; !strings.Contains(last, "with rejection") {
		t.Errorf("ceiling row named %q", last)
	}
	if col := sec.Tables[0].Columns[7]; col != "ceiling with rejection (req/s)" {
		t.Errorf("verdict ceiling column %q", col)
	}
}

func TestJointOptionsValidate(t *testing.T) {
	tr := Trace{Name: "x", Requests: smallTrace(t, 1).Requests[:10]}
	arms := JointArms()
	noBase := arms[1:]
	twoBase := append([]JointArm{arms[0]}, arms...)
	badPol := []JointArm{arms[0], {Name: "bad", Policy: "nope", Routing: sim.RoutingJoint}}
	for _, tc := range []struct {
		o    JointOptions
		want string
	}{
		{JointOptions{}, "Traces"},
		{JointOptions{Traces: []Trace{{Name: "", Requests: tr.Requests}}}, "Traces[0]"},
		{JointOptions{Traces: []Trace{{Name: "x"}}}, "no requests"},
		{JointOptions{Traces: []Trace{tr}, Workers: -1}, "Workers"},
		{JointOptions{Traces: []Trace{tr}, Arms: noBase}, "Baseline"},
		{JointOptions{Traces: []Trace{tr}, Arms: twoBase}, "Baseline"},
		{JointOptions{Traces: []Trace{tr}, Arms: badPol}, `Arms[1] "bad"`},
		{JointOptions{Traces: []Trace{tr}, Arms: []JointArm{{Policy: "lru", Baseline: true}}}, "empty name"},
	} {
		err := tc.o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error mentioning %q", tc.o, err, tc.want)
		}
	}
	if err := (JointOptions{Traces: []Trace{tr}}).Validate(); err != nil {
		t.Errorf("default options: %v", err)
	}
}

func near2(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

// TestJointFig10 runs the full comparison on both published traces (about
// 90 s on 2 cores, so only when KVPOOL_JOINT_FIG10 is set) and pins its
// findings: ours beats the baseline's goodput with a lower mean TTFT, and
// no arm passes the pooled FIFO ceiling. With KVPOOL_JOINT_OUT set it also
// writes the section as a report directory there.
func TestJointFig10(t *testing.T) {
	if os.Getenv("KVPOOL_JOINT_FIG10") == "" {
		t.Skip("full joint comparison; set KVPOOL_JOINT_FIG10=1")
	}
	traces := []Trace{sharedTrace(t, "conversation"), sharedTrace(t, "synthetic")}
	for _, reject := range []bool{false, true} {
		t.Run("reject="+strconv.FormatBool(reject), func(t *testing.T) {
			o := JointOptions{Traces: traces, Reject: reject}
			if testing.Verbose() {
				o.Progress = os.Stderr
			}
			res, err := RunJoint(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range res.Traces {
				b, ours, c := res.Baseline(tr), res.Ours(tr), res.Ceiling(tr)
				if !(ours.ReqPerSec > b.ReqPerSec) {
					t.Errorf("%s: ours (%s) %g req/s, not above the baseline's %g", tr, ours.Arm.Name, ours.ReqPerSec, b.ReqPerSec)
				}
				if ours.AtBaseline.TTFTMean > b.AtBaseline.TTFTMean || ours.AtTraceRate.TTFTMean > b.AtTraceRate.TTFTMean {
					t.Errorf("%s: ours mean TTFT %g s (×1: %g s) above the baseline's %g s (%g s)", tr,
						ours.AtBaseline.TTFTMean, ours.AtTraceRate.TTFTMean, b.AtBaseline.TTFTMean, b.AtTraceRate.TTFTMean)
				}
				for _, row := range res.Rows {
					if row.Trace == tr && row.ReqPerSec > c.ReqPerSec {
						t.Errorf("%s: %s at %g req/s passes the pooled ceiling %g", tr, row.Arm.Name, row.ReqPerSec, c.ReqPerSec)
					}
				}
				t.Logf("%s: baseline %.3f req/s, ours (%s) %.3f (%.3f×), mean TTFT at the baseline's goodput %.2f → %.2f s, ceiling %.3f (%.3f×), shortest-first ceiling %.3f×",
					tr, b.ReqPerSec, ours.Arm.Name, ours.ReqPerSec, ours.Ratio, b.AtBaseline.TTFTMean, ours.AtBaseline.TTFTMean,
					c.ReqPerSec, c.Ratio, c.ShortestFirstRatio)
			}
			if dir := os.Getenv("KVPOOL_JOINT_OUT"); dir != "" {
				dir = filepath.Join(dir, "reject-"+strconv.FormatBool(reject))
				rep := &report.Report{Title: "Joint routing and placement", Sections: []report.Section{res.Section()}}
				if err := report.Write(dir, rep); err != nil {
					t.Fatal(err)
				}
				if err := report.WriteJSON(filepath.Join(dir, "joint.json"), res); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
