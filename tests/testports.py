"""Ports for the servers tests start, chosen so that nothing else takes them before the server binds.

"Bind port 0, read it, close" races twice: the kernel hands the same ephemeral ports to every outgoing
connection (a gateway's keep-alive to its upstream can sit on the port a moment later), and the test
processes ctest runs side by side each pick on their own. So ports come from below the kernel's ephemeral
range, and each one is reserved across processes by a lock on one byte of a shared file at the port's
offset: POSIX record locks, held as long as the process that took them lives, released by the kernel
when it ends, however it ends. A port also has to bind at the moment it is chosen (a server started
by someone else keeps it out)."""
import fcntl
import os
import random
import socket
import sys
import tempfile

# One per user: a file another user created may not be writable here.
_LOCK_FILE = os.path.join(tempfile.gettempdir(), "agentpay-test-ports-%d.lock" % os.getuid())
_SPAN = 12000  # how many ports below the ephemeral range are ours to choose from
_lock_fd = None
_taken = set()  # ports this process already holds


def _range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    if low - _SPAN >= 1024:
        return low - _SPAN, low
    return high + 1, min(65536, high + 1 + _SPAN)  # an unusual range: above it then


def _bindable(host, port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no obstacle
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def reserve(host="127.0.0.1"):
    """A port on `host` that no other test process holds and nothing listens on; held until this
    process ends."""
    global _lock_fd
    if _lock_fd is None:
        _lock_fd = os.open(_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
    low, high = _range()
    for _ in range(2000):
        port = random.randrange(low, high)
        if port in _taken:
            continue
        try:
            fcntl.lockf(_lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
        except OSError:
            continue  # another test process holds it
        if _bindable(host, port):
            _taken.add(port)
            return port
        fcntl.lockf(_lock_fd, fcntl.LOCK_UN, 1, port)
    raise RuntimeError("no free port in %d..%d for tests" % (low, high - 1))


if __name__ == "__main__":
    if sys.argv[1:] == ["--hold"]:
        # For a test in another language (tests/browser/lib.mjs): one port per line read from stdin,
        # each held until stdin closes, which it does when that test process ends, however it ends.
        for _ in sys.stdin:
            print(reserve(), flush=True)
    else:
        print(reserve())  # for a shell script: free now, no longer reserved once this exits
