#!/usr/bin/env bash
# Diagnose which namespace stops the CUDA driver from starting inside the sandbox.
# Prints cuInit's return code for each unshare combination (0 = works).
cd "$(dirname "$0")/.."
code='import ctypes,sys
lib=ctypes.CDLL("libcuda.so.1"); n=ctypes.c_int(0); r=lib.cuInit(0); c=lib.cuDeviceGetCount(ctypes.byref(n)); print("cuInit", r, "count", c, n.value)'
for flags in "" "--net" "--pid --fork" "--mount" "--user" "--user --map-root-user" "--user --map-root-user --net" "--user --map-root-user --pid --fork" "--user --map-root-user --mount" "--user --map-root-user --net --pid --fork --kill-child"; do
  printf '%-60s ' "unshare $flags:"
  if [ -z "$flags" ]; then python3 -c "$code" 2>&1 | tail -1; else unshare $flags python3 -c "$code" 2>&1 | tail -1; fi
done
ls -la /dev/nvidia* 2>&1 | head; cat /proc/self/uid_map; cat /proc/sys/user/max_user_namespaces 2>&1
unshare --user --map-root-user sh -c 'ls -la /dev/nvidia* | head -4; id'
command -v strace && unshare --user --map-root-user strace -f -e trace=openat,ioctl -o /tmp/st.txt python3 -c "$code"; grep -n "nvidia\|EPERM\|EACCES" /tmp/st.txt 2>/dev/null | grep -v "= [0-9]" | head -20
mkdir -p /tmp/fsl_rw
printf '%-60s ' "full sandbox + fs_lock:"
unshare --user --map-root-user --mount --net --pid --fork --kill-child python3 -I src/cuda_agent/sandbox/fs_lock.py --rw /tmp/fsl_rw -- python3 -c "$code
for p in ('/tmp/fsl_rw/x', '/tmp/outside'):
    try: open(p, 'w').write('x'); print('wrote', p)
    except OSError as e: print('blocked', p, e.errno)" 2>&1 | tr '\n' ' '; echo
for flags in "--user --map-root-user --pid --fork --mount-proc" "--user --map-root-user --mount --net --pid --fork --kill-child --mount-proc"; do
  printf '%-60s ' "unshare $flags:"; unshare $flags python3 -c "$code" 2>&1 | tail -1
done
for rw in /tmp/fsl_rw /dev/shm "/dev/shm --rw /tmp" "$HOME"; do
  printf '%-60s ' "user+mount+fs_lock rw=$rw:"
  unshare --user --map-root-user --mount python3 -I src/cuda_agent/sandbox/fs_lock.py --rw $rw -- python3 -c "$code" 2>&1 | tail -1
done
