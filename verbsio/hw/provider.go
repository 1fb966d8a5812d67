package hw

import "github.com/rperf/rperf/verbsio"

// ProviderName is the name the hardware provider registers under.
const ProviderName = "ibverbs"

// Provider is the verbsio provider for kernel RDMA devices. Built with the
// ibverbs tag it drives them through libibverbs; without it, it lists them
// from sysfs and explains how to get a build that can open them.
type Provider struct{}

func init() { verbsio.Register(Provider{}) }

// Name implements verbsio.Provider.
func (Provider) Name() string { return ProviderName }
