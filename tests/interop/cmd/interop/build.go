//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/rperf/rperf/tests/oob"
)

// built is what buildAll produced.
type built struct {
	share     string // shared with the VM as /opt/interop
	hostRperf string // pure Go, for the udp fabric
	hostRdiag string
	commit    string // the repository's HEAD, "-dirty" when changed
}

// tools the suite needs on the host, and the Debian package of each.
var tools = map[string]string{
	"qemu-system-x86_64": "qemu-system-x86", "cpio": "cpio", "gzip": "gzip", "apt-get": "apt",
	"dpkg-deb": "dpkg", "depmod": "kmod", "modprobe": "kmod", "ip": "iproute2", "go": "golang",
	"ldconfig": "libc-bin", "chroot": "coreutils",
}

func checkTools() error {
	var missing []string
	for t, pkg := range tools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, fmt.Sprintf("%s (apt-get install %s)", t, pkg))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing host tools: %s", strings.Join(missing, ", "))
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		return errors.New("rperf's ibverbs build needs libibverbs-dev (apt-get install libibverbs-dev)")
	}
	return nil
}

// repoRoot is the module's root: the suite builds rperf from it.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run the suite from the rperf repository (go run ./tests/interop/cmd/interop)")
	}
	return filepath.Dir(mod), nil
}

// buildAll builds rperf and rdiag for the host (pure Go) and for the VM
// (cgo with the ibverbs provider: this host is Debian 12 like the guest,
// so the guest's libibverbs 44 runs it), and the VM's agent.
func (c *config) buildAll(ctx context.Context, logf func(string, ...any)) (*built, error) {
	b := &built{share: filepath.Join(c.build, "share")}
	if err := os.MkdirAll(filepath.Join(b.share, "bin"), 0o755); err != nil {
		return nil, err
	}
	host := filepath.Join(c.build, "host")
	b.hostRperf, b.hostRdiag = filepath.Join(host, "rperf"), filepath.Join(host, "rdiag")
	steps := []struct {
		env  []string
		args []string
	}{
		{[]string{"CGO_ENABLED=0"}, []string{"build", "-o", host + "/", "./cmd/rperf", "./cmd/rdiag"}},
		{[]string{"CGO_ENABLED=1"}, []string{"build", "-tags", "ibverbs", "-o", b.share + "/bin/", "./cmd/rperf", "./cmd/rdiag"}},
		{[]string{"CGO_ENABLED=0"}, []string{"build", "-o", b.share + "/bin/", "./tests/interop/cmd/interop-agent"}},
	}
	os.MkdirAll(host, 0o755)
	for _, s := range steps {
		t := time.Now()
		if err := c.goCmd(ctx, s.env, s.args...); err != nil {
			return nil, err
		}
		logf("go %s (%.1fs)", strings.Join(s.args, " "), time.Since(t).Seconds())
	}
	out, _ := exec.CommandContext(ctx, "git", "-C", c.repo, "describe", "--always", "--dirty", "--abbrev=12").Output()
	b.commit = strings.TrimSpace(string(out))
	return b, nil
}

func (c *config) goCmd(ctx context.Context, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = c.repo
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

var versionLine = regexp.MustCompile(`Version: (\S+)`)

// upstreamPerftest puts the eight upstream perftest programs into the
// share's perftest/ and returns the version they announce. c.perftest is
// a directory holding the built programs (a source tree where they were
// built included), or a source tree without them, built out of the tree
// in the build directory.
func (c *config) upstreamPerftest(ctx context.Context, share string, logf func(string, ...any)) (string, error) {
	dir := c.perftest
	_, built := os.Stat(filepath.Join(dir, "ib_write_lat"))
	if _, err := os.Stat(filepath.Join(dir, "configure.ac")); err == nil && built != nil {
		// A source tree without its programs: built out of it, in the
		// build directory.
		src, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		bdir := filepath.Join(c.build, "perftest-upstream")
		if src == bdir {
			return "", fmt.Errorf("-perftest %s is the suite's own build directory for perftest; give the source tree", dir)
		}
		if _, err := os.Stat(filepath.Join(bdir, "ib_write_lat")); err != nil || newer(src, filepath.Join(bdir, "ib_write_lat")) {
			logf("building upstream perftest from %s in %s (autogen, configure, make)", src, bdir)
			os.RemoveAll(bdir)
			if out, err := exec.CommandContext(ctx, "cp", "-a", src+"/.", bdir).CombinedOutput(); err != nil {
				return "", fmt.Errorf("copy %s: %w: %s", src, err, out)
			}
			script := "./autogen.sh && ./configure && make -j2"
			cmd := exec.CommandContext(ctx, "sh", "-c", script)
			cmd.Dir = bdir
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("building perftest in %s: %w (it needs autoconf automake libtool pkg-config libibverbs-dev librdmacm-dev libibumad-dev libpci-dev)\n%s", bdir, err, tail(out, 2000))
			}
		}
		dir = bdir
	}
	dst := filepath.Join(share, "perftest")
	os.MkdirAll(dst, 0o755)
	for _, p := range oob.Programs {
		b, err := os.ReadFile(filepath.Join(dir, string(p)))
		if err != nil {
			return "", fmt.Errorf("-perftest %s: %w (give a perftest source tree or the directory of its built programs)", c.perftest, err)
		}
		if err := os.WriteFile(filepath.Join(dst, string(p)), b, 0o755); err != nil {
			return "", err
		}
	}
	out, _ := exec.CommandContext(ctx, filepath.Join(dst, "ib_write_lat"), "--version").CombinedOutput()
	m := versionLine.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version printed no version: %q", filepath.Join(dst, "ib_write_lat"), out)
	}
	logf("upstream perftest announces %s", m[1])
	return string(m[1]), nil
}

// newer reports whether any file under src is newer than ref.
func newer(src, ref string) bool {
	st, err := os.Stat(ref)
	if err != nil {
		return true
	}
	found := false
	filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipDir
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if i, err := d.Info(); err == nil && !d.IsDir() && i.ModTime().After(st.ModTime()) {
			found = true
		}
		return nil
	})
	return found
}

func tail(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
