package client

import (
	"context"
	"errors"

	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// namedOps are the node client's named forms (written on the node side).
// Until they exist in nodeclient.Pool, a pool without them fails named
// calls with errNoNamedOps. TEMPORARY: removed once nodeclient has them.
type namedOps interface {
	MGetNamed(ctx context.Context, names []string, dsts [][]byte) ([]nodeclient.Result, error)
	MPutNamed(ctx context.Context, names []string, payloads [][]byte) ([]error, error)
	DeleteNamed(ctx context.Context, name string) error
}

var errNoNamedOps = errors.New("client: this node client has no named operations yet")

type noNamedOps struct{}

func (noNamedOps) MGetNamed(context.Context, []string, [][]byte) ([]nodeclient.Result, error) {
	return nil, errNoNamedOps
}
func (noNamedOps) MPutNamed(context.Context, []string, [][]byte) ([]error, error) {
	return nil, errNoNamedOps
}
func (noNamedOps) DeleteNamed(context.Context, string) error { return errNoNamedOps }

func named(p *nodeclient.Pool) namedOps {
	if n, ok := any(p).(namedOps); ok {
		return n
	}
	return noNamedOps{}
}
