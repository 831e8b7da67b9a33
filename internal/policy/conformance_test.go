package policy_test

import (
	"testing"

	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/internal/policy/policytest"
)

// TestEvictionConformance runs the conformance suite against every
// registered eviction policy and the option variants the registry does not
// expose.
func TestEvictionConformance(t *testing.T) {
	for _, name := range policy.EvictionNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			policytest.Run(t, func(c int) policy.Eviction {
				ev, err := policy.NewEviction(name, c)
				if err != nil {
					t.Fatal(err)
				}
				return ev
			})
		})
	}
	t.Run("belady-nobypass", func(t *testing.T) {
		t.Parallel()
		policytest.Run(t, func(c int) policy.Eviction {
			return policy.NewBelady(c, policy.BeladyOptions{NoBypass: true})
		})
	})
	t.Run("s3fifo-move1", func(t *testing.T) {
		t.Parallel()
		policytest.Run(t, func(c int) policy.Eviction {
			p, err := policy.NewS3FIFOWith(c, policy.S3FIFOOptions{MoveToMain: 1})
			if err != nil {
				t.Fatal(err)
			}
			return p
		})
	})
	t.Run("kvchain-perr", func(t *testing.T) {
		t.Parallel()
		policytest.Run(t, func(c int) policy.Eviction {
			ev, err := policy.NewEviction("kvchain(perr=0.3,seed=7)", c)
			if err != nil {
				t.Fatal(err)
			}
			return ev
		})
	})
	for name, o := range map[string]policy.ChainOptions{
		"kvchain-noduel":   {DisableDuel: true},
		"kvchain-noprob":   {DisableProbation: true},
		"kvchain-nosketch": {DisableSketch: true, GhostPercent: 50},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			policytest.Run(t, func(c int) policy.Eviction {
				p, err := policy.NewChainWith(c, o)
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
	t.Run("mooncake-exact", func(t *testing.T) {
		t.Parallel()
		policytest.Run(t, func(c int) policy.Eviction {
			p, err := policy.NewMooncakeWith(c, policy.MooncakeOptions{Samples: 1 << 20, HighWatermark: 1, EvictRatio: 0.5})
			if err != nil {
				t.Fatal(err)
			}
			return p
		})
	})
}

// TestAdmissionConformance runs the admission suite against every
// registered admission policy.
func TestAdmissionConformance(t *testing.T) {
	for _, name := range policy.AdmissionNames() {
		t.Run(name, func(t *testing.T) {
			policytest.RunAdmission(t, func(c int) policy.Admission {
				a, err := policy.NewAdmission(name, c)
				if err != nil {
					t.Fatal(err)
				}
				return a
			})
		})
	}
}
