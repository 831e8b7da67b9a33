package option

import (
	"errors"
	"fmt"
	"testing"
)

func TestWords(t *testing.T) {
	for _, c := range []struct{ field, want string }{
		{"RAMBlocks", "RAM blocks"},
		{"HotAccesses", "hot accesses"},
		{"NICGbps", "NIC Gbps"},
		{"SSDGBps", "SSD GBps"},
		{"SLOSeconds", "SLO seconds"},
		{"Capacity", "capacity"},
		{"Promotion.MaxPerHeartbeat", "promotion max per heartbeat"},
		{"FromMs", "from ms"},
		{"Traces[2]", "traces[2]"},
	} {
		if got := Words(c.field); got != c.want {
			t.Errorf("Words(%q) = %q, want %q", c.field, got, c.want)
		}
	}
}

func TestInnermost(t *testing.T) {
	inner := Errorf("RAMBlocks", "must be > 0, got %d", -5)
	err := fmt.Errorf("demo: %w", Errorf("Cluster", "%w", fmt.Errorf("sim: %w", inner)))
	if got, want := err.Error(), "demo: cluster: sim: RAM blocks: must be > 0, got -5"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	flags := map[string]string{"RAMBlocks": "--ram-blocks", "Cluster": "--cluster"}
	e, name := Innermost(err, func(f string) (string, bool) { n, ok := flags[f]; return n, ok })
	if e != inner || name != "--ram-blocks" {
		t.Errorf("Innermost = %v, %q; want the RAM blocks error, --ram-blocks", e, name)
	}
	if e, _ := Innermost(errors.New("plain"), func(string) (string, bool) { return "", true }); e != nil {
		t.Errorf("Innermost of a plain error = %v, want nil", e)
	}
}
