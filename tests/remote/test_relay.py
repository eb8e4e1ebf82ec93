"""Self-test of latency_relay.py (no borgcheck, no ssh): bytes through it come back equal, the
delay is one-way per direction (a round trip grows by at least 2*D), queued chunks are not
delayed in series, and --cut-after-bytes / --stall-after-bytes behave as documented.

    python3 test_relay.py [unittest args]

The relay talks to an echo server on 127.0.0.1; the test plays ssh on its stdin/stdout.
Timing assertions are one-sided (at least the delay; far below the serial sum) and generous.
"""

import os
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True
RELAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "latency_relay.py")


class EchoServer:
    """Accepts connections and echoes everything back until the client shuts down its side."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.echo, args=(conn,), daemon=True).start()

    @staticmethod
    def echo(conn):
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                    if not data:
                        return
                    conn.sendall(data)
                except OSError:
                    return

    def close(self):
        self.sock.close()


class RelayTest(unittest.TestCase):
    def setUp(self):
        self.echo = EchoServer()
        self.addCleanup(self.echo.close)

    def relay(self, *options):
        p = subprocess.Popen([sys.executable, RELAY] + list(options) + ["127.0.0.1", str(self.echo.port)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.addCleanup(self.reap, p)
        return p

    @staticmethod
    def reap(p):
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdin.close()
        p.stdout.close()

    @staticmethod
    def read_exactly(f, n):
        out = bytearray()
        while len(out) < n:
            data = f.read(n - len(out))
            if not data:
                break
            out += data
        return bytes(out)

    def pump(self, p, payload):
        """Writes payload (from a thread) while reading the echo; returns what came back."""
        writer = threading.Thread(target=p.stdin.write, args=(payload,))
        writer.start()
        back = self.read_exactly(p.stdout, len(payload))
        writer.join()
        return back

    def test_bytes_come_back_equal_with_the_round_trip_delayed_by_twice_d(self):
        p = self.relay("--delay-ms", "50")
        start = time.monotonic()
        self.assertEqual(self.pump(p, b"ping"), b"ping")
        self.assertGreaterEqual(time.monotonic() - start, 0.1)  # 2 * 50 ms
        payload = os.urandom(16 << 20)
        start = time.monotonic()
        self.assertEqual(self.pump(p, payload), payload)
        # At least 256 chunks of at most 64 KiB each way: delayed in series, at least 25 s.
        self.assertLess(time.monotonic() - start, 10)
        p.stdin.close()  # ssh closing: the relay passes the EOF on and ends
        self.assertEqual(p.stdout.read(), b"")
        self.assertEqual(p.wait(timeout=10), 0)

    def test_zero_delay_passes_bytes_through(self):
        p = self.relay()
        payload = os.urandom(1 << 20)
        self.assertEqual(self.pump(p, payload), payload)
        p.stdin.close()
        self.assertEqual(p.stdout.read(), b"")
        self.assertEqual(p.wait(timeout=10), 0)

    def test_cut_after_bytes_closes_both_sides(self):
        p = self.relay("--delay-ms", "5", "--cut-after-bytes", "1000")
        p.stdin.write(os.urandom(5000))
        self.assertEqual(len(p.stdout.read()), 1000)  # then EOF: the relay closed its stdout
        self.assertEqual(p.wait(timeout=10), 0)

    def test_stall_after_bytes_keeps_the_connection_open_until_ssh_goes(self):
        p = self.relay("--stall-after-bytes", "1000")
        payload = os.urandom(5000)
        p.stdin.write(payload)
        self.assertEqual(self.read_exactly(p.stdout, 1000), payload[:1000])
        # Nothing more arrives, and the relay stays up (no EOF).
        got = []
        reader = threading.Thread(target=lambda: got.append(p.stdout.read(1)), daemon=True)
        reader.start()
        reader.join(1.0)
        self.assertTrue(reader.is_alive(), got)
        self.assertIsNone(p.poll())
        p.stdin.close()  # ssh stopped: the relay ends
        self.assertEqual(p.wait(timeout=10), 0)
        reader.join(10)
        self.assertEqual(got, [b""])

    def test_unreachable_server_exits_1(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        r = subprocess.run([sys.executable, RELAY, "127.0.0.1", str(port)], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot connect", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
