package soft

import (
	"strings"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// ProviderName is the name the built-in engine registers under.
const ProviderName = "soft"

// ShmDevice is the name of the shared-memory device.
const ShmDevice = "shm0"

// Provider is the built-in engine's verbsio provider.
type Provider struct{}

func init() { verbsio.Register(Provider{}) }

// Name implements verbsio.Provider.
func (Provider) Name() string { return ProviderName }

// Devices implements verbsio.Provider.
func (Provider) Devices() ([]verbsio.DeviceInfo, error) {
	return append(append([]verbsio.DeviceInfo{shmInfo()}, udpDevices()...), rawDevices()...), nil
}

func shmInfo() verbsio.DeviceInfo {
	return verbsio.DeviceInfo{
		Name:      ShmDevice,
		Provider:  ProviderName,
		Fabric:    "shm",
		Transport: "engine",
		NodeGUID:  hostGUID(),
		Ports:     1,
	}
}

// Open implements verbsio.Provider.
func (p Provider) Open(name string) (verbsio.ContextImpl, error) {
	return p.OpenWith(name, verbsio.OpenOptions{})
}

// OpenWith implements verbsio.OptionsOpener.
func (Provider) OpenWith(name string, o verbsio.OpenOptions) (verbsio.ContextImpl, error) {
	switch {
	case name == ShmDevice:
		return openShm(shmInfo())
	case strings.HasPrefix(name, UDPPrefix):
		return openUDP(name, o)
	case strings.HasPrefix(name, RawPrefix):
		return openRaw(name, o)
	}
	return nil, verbsio.Errorf("open_device", unix.ENODEV, "the built-in engine has no device %q", name)
}
