package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/option"
)

// This file holds the checks every subcommand's flags go through, so that
// a bad value is refused with exit status 2 in terms of the flag the user
// typed: no numeric flag takes a negative value (parseFlags checks that
// for every flag set), a flag for which 0 means nothing useful refuses it
// (refuseZero), and an options struct's own check (an *option.Error) is
// reported under the flag that set the field (flagError).

// checkNumbers refuses the first numeric flag of fs (int, float,
// duration) holding a negative or non-finite value.
func checkNumbers(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil {
			return
		}
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		switch v := g.Get().(type) {
		case int:
			if v < 0 {
				err = usageErrorf("--%s %d: want a number >= 0", f.Name, v)
			}
		case int64:
			if v < 0 {
				err = usageErrorf("--%s %d: want a number >= 0", f.Name, v)
			}
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				err = usageErrorf("--%s %v: want a finite number >= 0", f.Name, v)
			}
		case time.Duration:
			if v < 0 {
				err = usageErrorf("--%s %v: want a duration >= 0", f.Name, v)
			}
		}
	})
	return err
}

// refuseZero refuses 0 for each of the named numeric flags of fs: flags
// whose zero would mean nothing (no nodes, no speed), and whose default
// is written in the flag's default value rather than behind a 0.
func refuseZero(fs *flag.FlagSet, names ...string) error {
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			panic("refuseZero: no flag --" + name) // a programming error, caught by the tests
		}
		if v, ok := f.Value.(flag.Getter); ok && isZero(v.Get()) {
			return usageErrorf("--%s 0: want a value > 0 (default %s)", name, f.DefValue)
		}
	}
	return nil
}

// isZero reports whether a flag's value is a numeric zero.
func isZero(v any) bool {
	switch v := v.(type) {
	case int:
		return v == 0
	case int64:
		return v == 0
	case uint64:
		return v == 0
	case float64:
		return v == 0
	case time.Duration:
		return v == 0
	}
	return false
}

// optionFlags names the flag that sets each options field whose flag is
// not the field's name in words with dashes ("RAMBlocks": --ram-blocks),
// in the subcommands that have that flag. One table for every
// subcommand, so that a field is called by the same flag everywhere.
func optionFlags() map[string]string {
	return map[string]string{
		"Instances":                 "nodes", // demo, compare: a node per simulated instance
		"PayloadBytes":              "payload",
		"RateMultiplier":            "rate",
		"SLOSeconds":                "slo",
		"HeartbeatInterval":         "heartbeat",
		"Eviction":                  "eviction-policy",
		"Promotion.MaxPerHeartbeat": "max-per-heartbeat",
		"MeanTurns":                 "turns",
		"MaxInputTokens":            "max-input",
		"BlockSize":                 "block", // bench; up's --block-size is the field's own name
		"BlockSizes":                "block",
		"DataBytes":                 "data",
		"Addr":                      "redis-addr",
		"Against":                   "vs",
		"RAMBytes":                  "ram",
		"SSDBytes":                  "ssd",
		"Capacities":                "sweep",
		"Policies":                  "policy",
		"Names":                     "name",
		"FromMs":                    "from",
		"ToMs":                      "to",
	}
}

// flagError returns err, from the Validate of options fs's flags were
// put into, as a usage error (exit status 2). When err is an
// *option.Error of a field a flag of fs sets, it names the flag instead
// of the field: overrides[field], optionFlags()[field] or the field's
// name in words with dashes, the first that is a flag of fs.
func flagError(fs *flag.FlagSet, err error, overrides map[string]string) error {
	if err == nil {
		return nil
	}
	table := optionFlags()
	name := func(field string) (string, bool) {
		for _, n := range []string{overrides[field], table[field],
			strings.ToLower(strings.ReplaceAll(option.Words(field), " ", "-"))} {
			if n != "" && fs.Lookup(n) != nil {
				return "--" + n, true
			}
		}
		return "", false
	}
	if e, flagName := option.Innermost(err, name); e != nil {
		return fmt.Errorf("%w: %s: %w", errUsage, flagName, e.Err)
	}
	if errors.Is(err, errUsage) {
		return err
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}
