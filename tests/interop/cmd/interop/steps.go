//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rperf/rperf/internal/testsupport/devinfotest"
	"github.com/rperf/rperf/tests/interop/internal/matrix"
	"github.com/rperf/rperf/tests/interop/internal/vm"
)

// runOut runs argv on r to completion (within limit) with its output in
// rel, and returns the output.
func runOut(ctx context.Context, r vm.Runner, results string, argv []string, rel string, limit time.Duration) (string, vm.Result, error) {
	path := filepath.Join(results, rel)
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.Remove(path)
	p, err := r.Start(argv, rel, limit)
	if err != nil {
		return "", vm.Result{RC: -1}, err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Kill()
		<-p.Done()
	}
	b, _ := os.ReadFile(path)
	res := p.Result()
	if res.RC != 0 || res.Killed {
		return string(b), res, fmt.Errorf("%s (%s): exit code %d, killed %v; see %s", strings.Join(argv, " "), r.Name(), res.RC, res.Killed, rel)
	}
	return string(b), res, nil
}

// devinfoCheck compares the device descriptions the suite captured in dir
// (see devinfo) and says where rdiag disagrees with ibv_devinfo and rdma;
// the table's devinfo line then says PASS or FAIL. nil leaves the
// comparison out.
var devinfoCheck = compareDevinfo

// compareDevinfo runs internal/testsupport/devinfotest's comparisons on
// the captures, as its TestRXECapture does on the checked-in ones, and
// lists every difference in dir/compare.txt.
func compareDevinfo(dir string) error {
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name+".txt"))
		return string(b)
	}
	var diffs []string
	for _, c := range []struct {
		name  string
		diffs []devinfotest.Diff
	}{
		{"info -v", devinfotest.CompareDevinfo(read("ibv_devinfo-v"), read("rdiag-info-v"))},
		{"info", devinfotest.CompareDevinfo(read("ibv_devinfo"), read("rdiag-info"))},
		{"ports", devinfotest.ComparePorts(read("ibv_devinfo-v"), read("rdma-link"), read("rdiag-ports"))},
		{"gids", devinfotest.CompareGIDs(read("ibv_devinfo-v"), read("rdiag-gids"))},
		{"dev", devinfotest.CompareRdmaDev(read("rdma-dev"), read("rdiag-info-v"))},
	} {
		for _, d := range c.diffs {
			diffs = append(diffs, c.name+": "+d.String())
		}
	}
	os.WriteFile(filepath.Join(dir, "compare.txt"), []byte(strings.Join(diffs, "\n")+"\n"), 0o644)
	if len(diffs) > 0 {
		return fmt.Errorf("%d differences (devinfo/compare.txt), the first: %s", len(diffs), diffs[0])
	}
	return nil
}

// devinfo captures rxe0 as libibverbs, iproute2 and rdiag describe it,
// into devinfo/ in the results, compares them, and returns the table's
// line about it and whether it passed.
func (c *config) devinfo(ctx context.Context, env *matrix.Env, b *built, logf func(string, ...any)) (string, bool) {
	cmds := []struct {
		name string
		argv []string
	}{
		{"ibv_devinfo-v.txt", []string{"ibv_devinfo", "-v", "-d", "rxe0"}},
		{"ibv_devinfo.txt", []string{"ibv_devinfo", "-d", "rxe0"}},
		{"rdiag-info-v.txt", []string{"/opt/interop/bin/rdiag", "info", "-v", "rxe0"}},
		{"rdiag-info.txt", []string{"/opt/interop/bin/rdiag", "info", "rxe0"}},
		{"rdiag-ports.txt", []string{"/opt/interop/bin/rdiag", "ports"}},
		{"rdiag-gids.txt", []string{"/opt/interop/bin/rdiag", "gids"}},
		{"rdma-link.txt", []string{"rdma", "link"}},
		{"rdma-dev.txt", []string{"rdma", "dev"}},
	}
	var failed []string
	for _, cmd := range cmds {
		if _, _, err := runOut(ctx, env.VM, c.results, cmd.argv, "devinfo/"+cmd.name, 60*time.Second); err != nil {
			failed = append(failed, err.Error())
		}
	}
	line := fmt.Sprintf("devinfo: %d descriptions of rxe0 in devinfo/", len(cmds))
	ok := len(failed) == 0
	if !ok {
		line += fmt.Sprintf("; %d commands FAILED: %s", len(failed), strings.Join(failed, "; "))
	}
	if devinfoCheck == nil {
		line += "; no comparison"
	} else if err := devinfoCheck(filepath.Join(c.results, "devinfo")); err != nil {
		line += "; rdiag against ibv_devinfo and rdma: FAIL: " + err.Error()
		ok = false
	} else {
		line += "; rdiag against ibv_devinfo and rdma: PASS"
	}
	logf("%s", line)
	return line, ok
}

// gidIndexes finds, on each side, the GID indexes of the IPv4-mapped
// address and of the fd00:77::/64 one: the {gid4} and {gid6} of the
// matrix's flags.
func gidIndexes(ctx context.Context, env *matrix.Env, b *built) (map[string]map[string]string, error) {
	out := map[string]map[string]string{"host": {}, "vm": {}}
	// The VM: rxe0's sysfs table, read directly.
	script := "for i in 0 1 2 3 4 5 6 7; do echo $i $(cat /sys/class/infiniband/rxe0/ports/1/gids/$i); done"
	text, _, err := runOut(ctx, env.VM, env.Results, []string{"sh", "-c", script}, "devinfo/rxe0-gids.txt", 30*time.Second)
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		switch {
		case strings.HasPrefix(f[1], "0000:0000:0000:0000:0000:ffff:"):
			setOnce(out["vm"], "gid4", f[0])
		case strings.HasPrefix(f[1], "fd00:0077:"):
			setOnce(out["vm"], "gid6", f[0])
		}
	}
	// The host: rdiag's table of udp_br0.
	text, _, err = runOut(ctx, env.Host, env.Results, []string{b.hostRdiag, "gids", "udp_" + vm.Bridge}, "devinfo/host-udp-gids.txt", 30*time.Second)
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || !strings.HasPrefix(f[0], "udp_") {
			continue
		}
		if _, err := strconv.Atoi(f[2]); err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(f[3], "::ffff:"):
			setOnce(out["host"], "gid4", f[2])
		case strings.HasPrefix(f[3], "fd00:77:"):
			setOnce(out["host"], "gid6", f[2])
		}
	}
	for side, m := range out {
		if m["gid4"] == "" || m["gid6"] == "" {
			return nil, fmt.Errorf("%s: no IPv4-mapped or no fd00:77:: GID found (devinfo/ has the tables): %v", side, m)
		}
	}
	return out, nil
}

func setOnce(m map[string]string, k, v string) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}
