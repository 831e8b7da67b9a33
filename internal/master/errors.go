package master

import (
	"fmt"

	"github.com/kvpool/kvpool/internal/meta"
)

// badRequest wraps meta.ErrBadRequest with what was wrong and where.
func badRequest(format string, a ...any) error {
	return fmt.Errorf("%w: %s", meta.ErrBadRequest, fmt.Sprintf(format, a...))
}
