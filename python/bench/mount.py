"""The FUSE mount the benchmarks compare against: started with `t3fs mount` on a cluster
directory, and stopped (unmounted, its process waited for) whatever the benchmark did.

Not here: anything measured; a host without fuse3 or /dev/fuse gets no mount (None), and each
benchmark says so in its output rather than skipping silently.
"""

import os
import shutil
import subprocess
import time


def mount(t3fs_bin, cluster, at):
    """The mount's process once `at` is mounted, or None on a host that cannot mount (no
    fusermount3 or /dev/fuse) or when the mount did not come up within 30 s."""
    if shutil.which("fusermount3") is None or not os.path.exists("/dev/fuse"):
        return None
    os.makedirs(at, exist_ok=True)
    p = subprocess.Popen([t3fs_bin, "mount", "--cluster", cluster, at])
    for _ in range(300):
        if os.path.ismount(at):
            return p
        time.sleep(0.1)
    p.kill()
    p.wait()
    return None


def unmount(proc, at):
    """Unmounts `at` and waits for the mount's process (nothing when `proc` is None)."""
    if proc is None:
        return
    subprocess.run(["fusermount3", "-u", at], check=False)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
