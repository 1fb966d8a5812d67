package soft_test

import (
	"testing"

	"github.com/rperf/rperf/verbsio/verbstest"
)

func TestConformanceShm(t *testing.T) { verbstest.Run(t, "shm0") }
