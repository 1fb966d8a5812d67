package verbsio_test

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
)

type noMADContext struct{ verbsio.ContextImpl }

type madContext struct {
	verbsio.ContextImpl
	opened []uint8
}

func (c *madContext) OpenMADPort(port uint8) (verbsio.MADPort, error) {
	c.opened = append(c.opened, port)
	return nil, nil
}

// TestOpenMADPort: a context that exposes QP1 is asked for it; one that
// does not gives EOPNOTSUPP naming the device.
func TestOpenMADPort(t *testing.T) {
	ctx := verbsio.NewContext(verbsio.DeviceInfo{Name: "fake0"}, noMADContext{})
	_, err := ctx.OpenMADPort(1)
	if !errors.Is(err, unix.EOPNOTSUPP) || !strings.Contains(err.Error(), "fake0") {
		t.Errorf("no QP1: %v", err)
	}
	impl := &madContext{}
	ctx = verbsio.NewContext(verbsio.DeviceInfo{Name: "fake1"}, impl)
	if _, err := ctx.OpenMADPort(1); err != nil || len(impl.opened) != 1 || impl.opened[0] != 1 {
		t.Errorf("OpenMADPort: %v, provider saw %v", err, impl.opened)
	}
}
