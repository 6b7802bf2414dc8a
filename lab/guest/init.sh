#!/bin/sh
# unpack-bench's user-mode-linux guest: process 1 of a kernel booted by lab/src/bench/guest.rs
# with the host's root as a read-only hostfs root. It makes the machine the bench needs (the
# kernel's loop, NFS client and nfsd modules from the directory the host names on the kernel
# command line, UNPACK_GUEST_MODULES: the guest kit's modules of this release; loopback; the
# writable directories NFS and the bench write to), runs the one unpack-bench command the host
# wrote into the shared directory, leaves its exit status there, and powers the guest off. It
# never writes to the host except into that directory (a writable hostfs mount of it).
# Everything NFS itself needs (rpcbind, exports, mountd, nfsd threads, mounts) the bench does,
# as it does on a kernel with NFS.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
share=/run/unpack-share
fail() {
    echo "unpack-bench guest: $*" >&2
    busybox poweroff -f
}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=0755,size=90% tmpfs /run
mount -t tmpfs -o mode=0755 tmpfs /var/lib/nfs
mkdir -p "$share" /run/tmp /run/rpcbind /run/kmod/lib/modules /var/lib/nfs/v4recovery
touch /var/lib/nfs/etab /var/lib/nfs/rmtab
mount -t hostfs -o "$UNPACK_GUEST_SHARE" hostfs "$share" || fail "cannot mount $UNPACK_GUEST_SHARE"
release=$(uname -r)
[ -f "$UNPACK_GUEST_MODULES/modules.dep" ] ||
    fail "no modules.dep in '$UNPACK_GUEST_MODULES' (UNPACK_GUEST_MODULES) for kernel $release"
ln -s "$UNPACK_GUEST_MODULES" "/run/kmod/lib/modules/$release"
for module in loop nfsd nfsv3 nfsv4; do
    modprobe -d /run/kmod "$module" || fail "modprobe $module from $UNPACK_GUEST_MODULES failed"
done
ip link set lo up || fail "cannot bring lo up"
mem=$(awk '/^MemTotal/ { print int($2 / 1024) }' /proc/meminfo)
export TMPDIR=/run/tmp
export UNPACK_BENCH_GUEST="user-mode-linux guest (kernel $release, 1 CPU, $mem MiB)"
cd "$(cat "$share/cwd")" || fail "cannot enter the host's working directory"
# The host's argument vector, NUL-separated: no shell ever parses it (the inner sh only runs
# "$@", and records the exit status, which xargs itself would fold into 123).
xargs -0 -x -a "$share/argv" sh -c '"$@"; echo $? > "$0"' "$share/status"
sync
umount "$share"
busybox poweroff -f
