package rperfcmd

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/verbsio"
)

// prepared is what a side needs before it connects: the open device, the
// sizes checked against its limits, the output files, the environment.
type prepared struct {
	dev      *verbsio.Context
	sizes    []int
	jsonFile *os.File
	hgrm     map[int64]*os.File // --hgrm's files by message size, not yet written
	env      reports.Env
	ok       bool // the run succeeded: keep the JSON file
}

// prepare opens the device and checks everything that can be checked
// before connecting, so that bad flags fail at once (and, with --loopback,
// before the server process starts): the flags against the device's
// limits, then, with check, the test's configuration as it will run.
func prepare(o *options, check func(sizes []int) error) (p *prepared, err error) {
	p = &prepared{}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.jsonFile, err = createOutput(o.jsonPath, "--json"); err != nil {
		return p, err
	}
	if p.dev, err = o.openUDPAware(); err != nil {
		return p, err
	}
	if err = o.checkGID(p.dev); err != nil {
		return p, err
	}
	attr, err := p.dev.QueryDevice()
	if err != nil {
		return p, fmt.Errorf("query device %s: %w", o.device, err)
	}
	portAttr, err := p.dev.QueryPort(uint8(o.ibPort))
	if err != nil {
		return p, &cli.EnvironmentError{Err: fmt.Errorf("-i %d: %s has no such port (%v)", o.ibPort, o.device, err)}
	}
	if p.sizes, err = o.sizesFor(attr, portAttr, o.device); err != nil {
		return p, err
	}
	if err = o.checkDevice(attr, o.device); err != nil {
		return p, err
	}
	if err = o.fitValidation(p.sizes); err != nil {
		return p, err
	}
	if check != nil {
		if err = check(p.sizes); err != nil {
			return p, err
		}
	}
	if err = o.checkPathDevice(attr, p.sizes); err != nil {
		return p, err
	}
	p.env = reports.GatherEnv(reports.System{})
	d := p.dev.Device
	p.env.Provider, p.env.Fabric, p.env.Device, p.env.SendPath = d.Provider, fabricOf(d, portAttr), d.Name, o.path.String()
	return p, nil
}

// close releases the device and removes an unwritten JSON file and
// unwritten .hgrm files.
func (p *prepared) close() {
	if p.jsonFile != nil {
		p.jsonFile.Close()
		if !p.ok {
			os.Remove(p.jsonFile.Name())
		}
		p.jsonFile = nil
	}
	removeHGRM(p.hgrm)
	if p.dev != nil {
		p.dev.Close()
		p.dev = nil
	}
}

// openDevice opens the device, classifying failures as the machine's.
func openDevice(name string, oo verbsio.OpenOptions) (*verbsio.Context, error) {
	dev, err := verbsio.OpenWith(name, oo)
	if err == nil {
		return dev, nil
	}
	var ve *verbsio.Error
	if errors.Is(err, verbsio.ErrNotSupported) || errors.As(err, &ve) && ve.Errno == unix.ENODEV {
		return nil, &cli.EnvironmentError{Err: fmt.Errorf("-d %s: %w", name, err)}
	}
	return nil, fmt.Errorf("-d %s: %w", name, err)
}

// fabricOf names the transport under the provider.
func fabricOf(d verbsio.DeviceInfo, p verbsio.PortAttr) string {
	if d.Fabric != "" {
		return d.Fabric
	}
	switch p.LinkLayer {
	case verbsio.LinkLayerEthernet:
		return "roce"
	case verbsio.LinkLayerInfiniBand:
		return "ib"
	}
	return "unknown"
}
