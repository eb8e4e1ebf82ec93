#!/usr/bin/env python3
"""A relay for ssh's ProxyCommand that adds latency (and, for tests, stalls or cuts):

    ssh -o ProxyCommand="python3 latency_relay.py --delay-ms D 127.0.0.1 PORT" ...

It connects to HOST:PORT over TCP and copies stdin to the socket and the socket to stdout.

--delay-ms D is the ONE-WAY delay: every chunk read on one side is written on the other side D
milliseconds after it was read (or right after the chunk before it, if that one is still being
written). Both directions are delayed, so a round trip through the relay grows by 2*D: the
benchmark's round trips of 0, 20 and 100 ms are D = 0, 10 and 50. Each direction has a reader
that timestamps chunks into a queue and a writer that waits for each chunk's due time: order
is kept and throughput is not limited beyond what the delay implies (the delays of queued
chunks overlap; nothing sleeps D per chunk in series).

For tests of a server that goes away or goes silent (byte counts are of the server->client
direction, counted as they are written to stdout):
  --stall-after-bytes N  after N bytes, stop forwarding server->client and keep both sides
                         open (what the client sees of a hung server or a dead route); the
                         client->server direction goes on. The relay ends when ssh closes its
                         stdin (ssh was stopped).
  --cut-after-bytes N    after N bytes, close both sides and exit (a connection lost mid-run).
  --stall-marker PATH    with --stall-after-bytes: create PATH when the stall begins (so that a
                         test acts on a stalled link, not on one that has yet to stall).

Python 3 standard library only. Exit status: 0 after an orderly end or a cut, 1 if it cannot
connect.
"""

import argparse
import os
import queue
import socket
import sys
import threading
import time

CHUNK = 64 * 1024
# A bound on the chunks in flight per direction, far above what ssh keeps in flight (its
# channel window is 2 MiB), so it never limits throughput; it only caps memory.
QUEUE_CHUNKS = 16384
EOF = None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay per direction (ms)")
    p.add_argument("--stall-after-bytes", type=int, default=None,
                   help="stop forwarding server->client after N bytes; keep the connection open")
    p.add_argument("--cut-after-bytes", type=int, default=None,
                   help="close both sides after N bytes of server->client")
    p.add_argument("--stall-marker", default=None, help="a file created when the stall begins")
    p.add_argument("host")
    p.add_argument("port", type=int)
    return p.parse_args(argv)


class Relay:
    def __init__(self, args, sock, fd_in, fd_out):
        self.delay = args.delay_ms / 1000.0
        self.stall_after = args.stall_after_bytes
        self.stall_marker = args.stall_marker
        self.cut_after = args.cut_after_bytes
        self.sock, self.fd_in, self.fd_out = sock, fd_in, fd_out
        self.done = threading.Event()

    def finish(self):
        """Ends the relay: the main thread exits the process (closing both sides)."""
        self.done.set()

    def reader(self, read, q):
        while True:
            try:
                data = read()
            except OSError:
                data = b""
            q.put((time.monotonic() + self.delay, data or EOF))
            if not data:
                return

    def writer(self, q, write, close_write, limited):
        sent = 0
        while True:
            due, data = q.get()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if data is EOF:
                close_write()
                return
            if limited:
                data, sent, action = self.apply_limits(data, sent)
            else:
                action = None
            try:
                if data:
                    write(data)
            except OSError:
                self.finish()  # the other side is gone
                return
            if action == "cut":
                self.finish()
                return
            if action == "stall":
                if self.stall_marker:
                    open(self.stall_marker, "w").close()
                return  # keep everything open; stop forwarding this direction

    def apply_limits(self, data, sent):
        """The part of `data` to write, the new count, and "cut"/"stall" once a limit is hit."""
        for limit, action in ((self.cut_after, "cut"), (self.stall_after, "stall")):
            if limit is not None and sent + len(data) >= limit:
                return data[:max(0, limit - sent)], limit, action
        return data, sent + len(data), None

    def run(self):
        up = queue.Queue(QUEUE_CHUNKS)    # client (stdin) -> server (socket)
        down = queue.Queue(QUEUE_CHUNKS)  # server (socket) -> client (stdout)

        def write_out(data):
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd_out, view):]

        def close_out():
            os.close(self.fd_out)
            # Server->client is over: the relay ends once client->server is flushed too.
            up_writer.join()
            self.finish()

        def shut_sock():
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            if self.stall_after is not None:
                self.finish()  # ssh closed its side: nobody is left to stall for

        up_writer = threading.Thread(target=self.writer, args=(up, self.sock.sendall, shut_sock, False), daemon=True)
        threads = [
            threading.Thread(target=self.reader, args=(lambda: os.read(self.fd_in, CHUNK), up), daemon=True),
            up_writer,
            threading.Thread(target=self.reader, args=(lambda: self.sock.recv(CHUNK), down), daemon=True),
            threading.Thread(target=self.writer, args=(down, write_out, close_out, True), daemon=True),
        ]
        for t in threads:
            t.start()
        self.done.wait()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        sock = socket.create_connection((args.host, args.port))
    except OSError as e:
        print("latency_relay: cannot connect to %s:%d: %s" % (args.host, args.port, e), file=sys.stderr)
        return 1
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    Relay(args, sock, sys.stdin.fileno(), sys.stdout.fileno()).run()
    # os._exit: daemon threads may sit in blocking reads; the kernel closes both sides.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
