package policy

import (
	"errors"
	"fmt"
)

// ErrInvariant is wrapped by the errors CheckInvariants methods return.
var ErrInvariant = errors.New("policy invariant violated")

func invariantError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvariant, fmt.Sprintf(format, a...))
}

// optionError reports a bad option field.
func optionError(field string, value any, want string) error {
	return fmt.Errorf("policy: %s = %v: %s", field, value, want)
}
