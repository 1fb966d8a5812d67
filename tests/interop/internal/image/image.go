// Package image builds the interop suite's VM from Debian packages: the
// distribution's kernel (linux-image-amd64) and an initramfs holding
// busybox, rdma-core (libibverbs with the rxe provider, ibverbs-utils),
// perftest and iproute2's rdma tool, all fetched with apt-get download and
// unpacked with dpkg-deb. Nothing is compiled. Downloads and products are
// cached in the build directory and rebuilt only when an input changes.
package image

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// KernelMeta is the Debian package whose dependency names the kernel.
const KernelMeta = "linux-image-amd64"

// Packages is the guest's userspace, as Debian 12 package names. A binary
// whose library is missing fails the build with the library's name: add the
// package that ships it here.
var Packages = []string{
	"busybox-static", "libc6", "libgcc-s1",
	"libibverbs1", "ibverbs-providers", "ibverbs-utils", "librdmacm1", "libibumad3",
	"libnl-3-200", "libnl-route-3-200", "libudev1", "zlib1g",
	"perftest", "libpci3", "rdmacm-utils",
	"iproute2", "libmnl0", "libbsd0", "libmd0", "libcap2", "libelf1", "libbpf1",
}

// Modules are loaded in the guest in this order, each after its
// dependencies: the virtio devices, the 9p shares, the control port, and
// Soft-RoCE with the crc32 implementations rxe asks the crypto API for.
var Modules = []string{
	"virtio_pci", "virtio_net", "virtio_console", "9pnet_virtio", "9p",
	"crc32_generic", "crc32-pclmul", "crc32c_generic",
	"rdma_rxe", "ib_uverbs", "ib_umad", "rdma_ucm",
}

// Checked are the guest programs whose shared libraries must all resolve.
var Checked = []string{
	"usr/bin/ib_send_lat", "usr/bin/ib_write_bw", "usr/bin/ibv_devinfo", "usr/bin/ibv_devices",
	"usr/bin/rdma", "usr/bin/rping",
}

//go:embed init.sh
var initScript []byte

// Image is a built kernel and initramfs.
type Image struct {
	Kernel        string // vmlinuz path
	Initrd        string // gzip'd newc cpio
	KernelVersion string // e.g. 6.1.0-48-amd64
	// Versions lists "package version" of every package in the image.
	Versions []string
}

// Build returns the image, building what its cache lacks. dir is the
// build directory; log receives progress lines.
func Build(ctx context.Context, dir string, log io.Writer) (*Image, error) {
	if err := os.MkdirAll(filepath.Join(dir, "debs"), 0o755); err != nil {
		return nil, err
	}
	kpkg, err := kernelPackage(ctx)
	if err != nil {
		return nil, err
	}
	kver := strings.TrimPrefix(kpkg, "linux-image-")
	all := append([]string{kpkg}, Packages...)
	debs, err := download(ctx, filepath.Join(dir, "debs"), all, log)
	if err != nil {
		return nil, err
	}
	img := &Image{KernelVersion: kver}
	for _, p := range all {
		v, err := output(ctx, "dpkg-deb", "-f", debs[p], "Version")
		if err != nil {
			return nil, err
		}
		img.Versions = append(img.Versions, p+" "+strings.TrimSpace(v))
	}

	// The kernel: vmlinuz and the module tree, depmod'ed.
	kroot := filepath.Join(dir, "kernel-"+kver)
	if _, err := os.Stat(filepath.Join(kroot, "lib/modules", kver, "modules.dep")); err != nil {
		fmt.Fprintf(log, "image: unpacking %s\n", filepath.Base(debs[kpkg]))
		os.RemoveAll(kroot)
		if err := run(ctx, "dpkg-deb", "-x", debs[kpkg], kroot); err != nil {
			return nil, err
		}
		if err := run(ctx, "depmod", "-b", kroot, kver); err != nil {
			return nil, err
		}
	}
	img.Kernel = filepath.Join(kroot, "boot", "vmlinuz-"+kver)
	mods, err := moduleClosure(ctx, kroot, kver)
	if err != nil {
		return nil, err
	}

	// The initramfs, named by a hash of everything that goes into it.
	h := sha256.New()
	for _, p := range all {
		fmt.Fprintln(h, filepath.Base(debs[p]))
	}
	fmt.Fprintln(h, strings.Join(mods, " "))
	h.Write(initScript)
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	img.Initrd = filepath.Join(dir, "initrd-"+sum+".gz")
	if _, err := os.Stat(img.Initrd); err == nil {
		return img, nil
	}
	fmt.Fprintf(log, "image: building %s\n", filepath.Base(img.Initrd))
	root := filepath.Join(dir, "root-"+sum)
	os.RemoveAll(root)
	for _, p := range Packages {
		if err := run(ctx, "dpkg-deb", "-x", debs[p], root); err != nil {
			return nil, err
		}
	}
	if err := populate(ctx, root, kroot, kver, mods); err != nil {
		return nil, err
	}
	if err := checkLibraries(ctx, root); err != nil {
		return nil, err
	}
	tmp := img.Initrd + ".tmp"
	// cpio reads the file list from find; gzip compresses. Both are the
	// natural tools here.
	script := fmt.Sprintf("cd %q && find . -print0 | cpio --null -o -H newc --quiet | gzip -1 > %q", root, tmp)
	if err := run(ctx, "sh", "-c", script); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, img.Initrd); err != nil {
		return nil, err
	}
	os.RemoveAll(root)
	return img, nil
}

// kernelPackage resolves linux-image-amd64 to the versioned kernel package
// it depends on.
func kernelPackage(ctx context.Context) (string, error) {
	out, err := output(ctx, "apt-cache", "depends", KernelMeta)
	if err != nil {
		return "", fmt.Errorf("apt-cache depends %s: %w (is this Debian with an apt index? run apt-get update)", KernelMeta, err)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("apt-cache depends %s names no linux-image-* package:\n%s", KernelMeta, out)
}

// download fetches the packages that debs/ lacks and returns each
// package's .deb path.
func download(ctx context.Context, dir string, pkgs []string, log io.Writer) (map[string]string, error) {
	find := func(p string) string {
		m, _ := filepath.Glob(filepath.Join(dir, p+"_*.deb"))
		sort.Strings(m)
		if len(m) == 0 {
			return ""
		}
		return m[len(m)-1]
	}
	var missing []string
	for _, p := range pkgs {
		if find(p) == "" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(log, "image: apt-get download %s\n", strings.Join(missing, " "))
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-q", "-o", "APT::Sandbox::User=root", "download"}, missing...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("apt-get download: %w\n%s", err, out)
		}
	}
	debs := map[string]string{}
	for _, p := range pkgs {
		f := find(p)
		if f == "" {
			return nil, fmt.Errorf("apt-get download left no %s_*.deb in %s", p, dir)
		}
		debs[p] = f
	}
	return debs, nil
}

// moduleClosure returns the module files to load, dependencies first, as
// paths inside the kernel tree (lib/modules/...).
func moduleClosure(ctx context.Context, kroot, kver string) ([]string, error) {
	var files []string
	seen := map[string]bool{}
	for _, m := range Modules {
		out, err := output(ctx, "modprobe", "-d", kroot, "-S", kver, "--show-depends", m)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", m, err)
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "insmod" {
				continue // "builtin x": nothing to load
			}
			rel, err := filepath.Rel(kroot, f[1])
			if err != nil || strings.HasPrefix(rel, "..") {
				return nil, fmt.Errorf("module %s: %s is outside %s", m, f[1], kroot)
			}
			if !seen[rel] {
				seen[rel] = true
				files = append(files, rel)
			}
		}
	}
	return files, nil
}

// populate adds to the unpacked packages what makes them a system: the
// modules and their load order, busybox's applets, /init.
func populate(ctx context.Context, root, kroot, kver string, mods []string) error {
	for _, m := range mods {
		if err := copyFile(filepath.Join(kroot, m), filepath.Join(root, m), 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/interop"), 0o755); err != nil {
		return err
	}
	var list bytes.Buffer
	for _, m := range mods {
		fmt.Fprintln(&list, "/"+m)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/interop/modules"), list.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "init"), initScript, 0o755); err != nil {
		return err
	}
	// busybox-static is a static x86-64 binary: ask it for its applets.
	bb := filepath.Join(root, "bin/busybox")
	out, err := output(ctx, bb, "--list-full")
	if err != nil {
		return err
	}
	for _, a := range strings.Fields(out) {
		p := filepath.Join(root, a)
		if _, err := os.Lstat(p); err == nil {
			continue // a real program (iproute2's, rdma-core's) wins
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Symlink("/bin/busybox", p); err != nil {
			return err
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "out", "opt/interop", "root"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	return run(ctx, "ldconfig", "-r", root)
}

// checkLibraries resolves the shared libraries of the Checked programs
// inside root and names any that is missing.
func checkLibraries(ctx context.Context, root string) error {
	var errs []error
	for _, b := range Checked {
		out, err := output(ctx, "chroot", root, "/lib64/ld-linux-x86-64.so.2", "--list", "/"+b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			if strings.Contains(sc.Text(), "not found") {
				errs = append(errs, fmt.Errorf("%s needs %s: add the Debian package that ships it to image.Packages", b, strings.TrimSpace(sc.Text())))
			}
		}
	}
	return errors.Join(errs...)
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

func output(ctx context.Context, name string, args ...string) (string, error) {
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}
