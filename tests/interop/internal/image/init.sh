#!/bin/sh
# PID 1 of the interop suite's VM (busybox sh). It loads the modules listed
# in /etc/interop/modules, mounts the host's two 9p shares (results, rw, at
# /out; programs, ro, at /opt/interop), configures eth0 from the kernel
# command line (interop.addr=, interop.addr6=), creates rxe0 on it and runs
# the agent, which takes its orders over a virtio-serial port. When the
# agent ends, the VM powers off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
log() { echo "interop-init: $*"; }
arg() {
	for w in $(cat /proc/cmdline); do
		case $w in "$1="*) echo "${w#*=}" ;; esac
	done
}
log "started at $(cut -d' ' -f1 /proc/uptime)s"
while read -r m; do
	insmod "$m" || log "insmod $m failed"
done </etc/interop/modules
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /out || log "the out share did not mount"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro share /opt/interop || log "the program share did not mount"
hostname interop-vm
busybox ip link set lo up
busybox ip link set eth0 up
busybox ip addr add "$(arg interop.addr)" dev eth0
if [ -n "$(arg interop.addr6)" ]; then
	echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_dad
	busybox ip -6 addr add "$(arg interop.addr6)" dev eth0
fi
rdma link add rxe0 type rxe netdev eth0 || log "rdma link add failed"
i=0
while [ ! -e /sys/class/infiniband/rxe0 ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
log "rxe0 ready at $(cut -d' ' -f1 /proc/uptime)s"
/opt/interop/bin/interop-agent
log "the agent ended ($?); powering off"
sync
poweroff -f
