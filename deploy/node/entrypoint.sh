#!/bin/sh
# Copies the interposer onto the host (hostPath /usr/local/gpuslice), writes
# the ld.so.preload file that Allocate mounts at /etc/ld.so.preload in GPU
# containers, then runs the agent. The copy goes through a temporary name
# and rename(2), so a container starting meanwhile never sees half a file.
set -eu
host=${GPUSLICE_HOST_DIR:-/host/usr/local/gpuslice}
mkdir -p "$host/lib"
cp /opt/gpuslice/lib/libgpuslice.so "$host/lib/.libgpuslice.so.new"
mv -f "$host/lib/.libgpuslice.so.new" "$host/lib/libgpuslice.so"
printf '%s\n' /usr/local/gpuslice/lib/libgpuslice.so > "$host/.ld.so.preload.new"
mv -f "$host/.ld.so.preload.new" "$host/ld.so.preload"
exec /usr/local/bin/gpuslice-node-agent "$@"
