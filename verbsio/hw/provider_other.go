//go:build !(linux && cgo && ibverbs)

package hw

import "github.com/rperf/rperf/verbsio"

// Built is false in this build: the provider can list kernel RDMA devices
// (from sysfs) but not open them.
const Built = false

// Devices implements verbsio.Provider: the kernel RDMA devices sysfs shows
// (/sys/class/infiniband), read-only and best effort. Without an RDMA core
// in the kernel the list is empty and the error nil.
func (Provider) Devices() ([]verbsio.DeviceInfo, error) { return sysfsDevices(sysfsRoot) }

// Open implements verbsio.Provider. In this build it always fails with a
// *verbsio.UnsupportedError that says how to get a build that can open the
// device.
func (Provider) Open(name string) (verbsio.ContextImpl, error) {
	return nil, &verbsio.UnsupportedError{
		Feature:  "kernel RDMA device " + name,
		Provider: ProviderName,
		Reason:   "this rperf was built without the ibverbs provider",
		Fix:      "rebuild with: make build-ibverbs (needs libibverbs-dev: apt-get install libibverbs-dev)",
	}
}
