#!/usr/bin/env python3
"""tests/testports.py, checked: ports come from below the kernel's ephemeral range, two processes
reserving side by side never get the same port, a port one process holds is never handed to another
while it lives, and it is free again once that process is gone."""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testports  # noqa: E402

CHILD = ("import sys; sys.path.insert(0, %r); import testports\n"
         "ports = [testports.reserve() for _ in range(int(sys.argv[1]))]\n"
         "print(' '.join(map(str, ports)), flush=True)\n"
         "sys.stdin.read()  # hold them until told to go\n" % HERE)


def holder(count):
    return subprocess.Popen([sys.executable, "-c", CHILD, str(count)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


class TestPortsTest(unittest.TestCase):
    def test_ports_are_below_the_ephemeral_range(self):
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
        for _ in range(50):
            self.assertLess(testports.reserve(), ephemeral_low)

    def test_processes_side_by_side_never_share_a_port(self):
        # 4 processes x 1500 ports out of 12000: without the shared lock, random picks collide
        # with near certainty (birthday bound), so this fails if the reservation does not hold.
        procs = [holder(1500) for _ in range(4)]
        try:
            seen = [set(map(int, p.stdout.readline().split())) for p in procs]
            self.assertEqual([len(s) for s in seen], [1500] * 4)
            union = set().union(*seen)
            self.assertEqual(len(union), 6000, "two processes were given the same port")
            mine = {testports.reserve() for _ in range(200)}
            self.assertFalse(mine & union, "a port another process holds was handed out")
        finally:
            for p in procs:
                p.communicate("")

    def test_a_port_is_free_again_when_its_holder_ends(self):
        # The range is 12000 ports; a process holding 9000 of them leaves about 3000, and once it
        # ends, a fresh process can take 9000 again.
        first = holder(9000)
        first_ports = set(map(int, first.stdout.readline().split()))
        first.communicate("")
        second = holder(9000)
        try:
            second_ports = set(map(int, second.stdout.readline().split()))
        finally:
            second.communicate("")
        self.assertEqual(len(second_ports), 9000)
        self.assertTrue(first_ports & second_ports)

    def test_hold_serves_ports_until_stdin_closes(self):
        # `testports.py --hold`, as tests/browser/lib.mjs runs it: a port per line, held while it lives.
        child = subprocess.Popen([sys.executable, os.path.join(HERE, "testports.py"), "--hold"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            ports = []
            for _ in range(3):
                child.stdin.write("\n")
                child.stdin.flush()
                ports.append(int(child.stdout.readline()))
            self.assertEqual(len(set(ports)), 3, ports)
            fd = os.open(testports._LOCK_FILE, os.O_RDWR)
            try:
                for port in ports:
                    with self.assertRaises(OSError, msg="port %d is not held" % port):
                        testports.fcntl.lockf(fd, testports.fcntl.LOCK_EX | testports.fcntl.LOCK_NB, 1, port)
            finally:
                os.close(fd)
        finally:
            child.stdin.close()
            child.wait(timeout=10)
        self.assertEqual(child.returncode, 0)
        fd = os.open(testports._LOCK_FILE, os.O_RDWR)
        try:
            for port in ports:  # free again: taking the lock works
                testports.fcntl.lockf(fd, testports.fcntl.LOCK_EX | testports.fcntl.LOCK_NB, 1, port)
        finally:
            os.close(fd)


if __name__ == "__main__":
    unittest.main()
