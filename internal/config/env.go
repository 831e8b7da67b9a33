package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kvpool/kvpool/trace"
)

// EnvPrefix starts the name of every environment variable kvpool reads.
const EnvPrefix = "KVPOOL_"

// EnvConfigFile names the node's configuration file when --config is not
// given.
const EnvConfigFile = "KVPOOL_CONFIG"

// testEnvPrefix starts the variables the test suites of this repository
// set for their own processes (cmd/kvpool's KVPOOL_TEST_AS_BINARY and
// KVPOOL_TEST_FAULTFS).
const testEnvPrefix = "KVPOOL_TEST_"

// testEnv are the other variables the test suites read: longer runs of
// the fault, soak and joint-comparison tests, and the cluster package's
// fake processes (cmd/kvpool/faults_test.go, internal/node/soak_test.go,
// internal/lab/compare/joint_test.go, internal/cluster/cluster_test.go).
func testEnv() []string {
	return []string{"KVPOOL_FAULTS", "KVPOOL_SOAK", "KVPOOL_JOINT_FIG10", "KVPOOL_JOINT_OUT",
		"KVPOOL_CLUSTER_FAKE", "KVPOOL_CLUSTER_FAKE_EXIT"}
}

// KnownEnv returns every KVPOOL_ variable kvpool reads, sorted: the
// node's settings, the master's, the shared token variables, the node's
// configuration file, the trace directory and the test suites' own (but
// for those under the KVPOOL_TEST_ prefix, all of which are known).
func KnownEnv() []string {
	names := []string{EnvAuthToken, EnvTenantTokensFile, EnvSharedNamespaces, EnvConfigFile, trace.EnvTraceDir}
	for _, f := range fields() {
		names = append(names, envName(f.key))
	}
	for _, f := range masterFields() {
		names = append(names, MasterEnv(f.flag))
	}
	names = append(names, testEnv()...)
	slices.Sort(names)
	return slices.Compact(names)
}

// EnvWarnings returns a warning for every variable of environ (as
// os.Environ gives it, "NAME=value") whose name starts with KVPOOL_ but
// that kvpool does not read, a typo most likely, with the closest known
// name as a suggestion, as the configuration file's unknown keys get.
func EnvWarnings(environ []string) []string {
	known := KnownEnv()
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || strings.HasPrefix(name, testEnvPrefix) {
			continue
		}
		if _, found := slices.BinarySearch(known, name); found {
			continue
		}
		warnings = append(warnings, fmt.Sprintf("environment: unknown variable %s ignored%s", name, suggestion(name, known)))
	}
	return warnings
}
