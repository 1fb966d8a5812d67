package rperfcmd

// The tests open devices as the binary does, through the providers
// cmd/rperf links.
import _ "github.com/rperf/rperf/internal/cli/providers"
