"""A watchdog thread for each DDP rank: it ends the rank (exit code 3, a one-line reason on stderr) when the job it
belongs to is broken, so that no rank waits forever in a collective.

Why: a collective waits for every rank. PyTorch's gloo/NCCL collectives give up after the process-group timeout and
torch.distributed.run stops the other workers on its node when one fails; OneFlow 0.9.0 collectives have no timeout
at all and oneflow.distributed.launch only watches its own node. The watchdog adds, for both frameworks:
  1. launcher gone: the parent process changed (the launcher was killed): exit at once;
  2. peer gone: rank 0 listens on a TCP port, every other rank keeps one connection to it; a connection that closes
     without a goodbye, or sends nothing for `peer_limit_s`, means a rank (or its node) died: rank 0 exits, which
     closes its connections, so every other rank exits within seconds too, on any node;
  3. no progress: nothing called beat() for `stall_limit_s` (a rank stuck, not dead).
A rank that finishes normally calls finish(): it says goodbye, so its peers do not take its exit for a death.

This module imports no framework (the tests run it in plain Python processes: python -m utils.distributed.watchdog).
The rank comes from the job's DistContext; where rank 0 listens from the launchers' MASTER_ADDR and
YOLO_DDP_WATCHDOG_PORT (default MASTER_PORT + 1).
"""
import os
import select
import socket
import sys
import threading
import time

from utils.distributed.context import DistContext
from utils.settings import DDP_PEER_TIMEOUT, DDP_TIMEOUT, DDP_WATCHDOG_PORT

EXIT_CODE = 3
MAGIC = b"YOLOv5-DDP-watchdog-1\n"
PING, BYE = b"p", b"b"


def _env_int(name, default):
    try:
        return int(os.environ.get(name, ""))
    except ValueError:
        return default


def watchdog_port():
    port = DDP_WATCHDOG_PORT.get()
    return _env_int("MASTER_PORT", 29500) + 1 if port is None else port


class Watchdog(threading.Thread):
    def __init__(self, rank, world_size, addr="127.0.0.1", port=29501, stall_limit_s=10800.0,
                 peer_limit_s=60.0, connect_limit_s=300.0, poll_s=0.5, ping_s=5.0):
        super().__init__(name="ddp-watchdog", daemon=True)  # daemon: never keeps a finished process alive
        self.rank, self.world_size, self.addr, self.port = int(rank), int(world_size), addr, int(port)
        self.stall_limit_s, self.peer_limit_s = float(stall_limit_s), float(peer_limit_s)
        self.connect_limit_s, self.poll_s, self.ping_s = float(connect_limit_s), float(poll_s), float(ping_s)
        self.ppid = os.getppid()
        self.last_beat = time.monotonic()
        self.peers = {}  # rank -> [socket, last time heard from, said goodbye]
        self._server = None
        self._finished = threading.Event()
        self._lock = threading.Lock()
        self.peer_checks = True
        # Dataloader workers are forked from the rank: without this they would inherit the peer sockets and keep a
        # dead rank's connections open (its peers would then notice the death only when the workers exit).
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._drop_sockets_in_child)

    def _drop_sockets_in_child(self):
        self._finished.set()  # the child has no watchdog thread; it must never send a goodbye for the rank
        for sock, *_ in list(self.peers.values()):
            _close(sock)
        self.peers = {}
        _close(self._server)

    # ------------------------------------------------------------------------------------------------ public
    def beat(self):
        """Progress: called by the training loop (a forward pass). A plain store: cheap enough for every step."""
        self.last_beat = time.monotonic()

    def finish(self):
        """This rank ends normally: say goodbye to the peers and stop watching."""
        self._finished.set()
        with self._lock:
            for sock, *_ in self.peers.values():
                _send(sock, BYE)
            for sock, *_ in self.peers.values():
                _close(sock)
            self.peers.clear()
            _close(self._server)

    # ------------------------------------------------------------------------------------------------ internals
    def fail(self, reason):
        if self._finished.is_set():
            return
        sys.stderr.write(f"\nDDP watchdog (rank {self.rank}/{self.world_size}, pid {os.getpid()}): {reason}. "
                         f"Exiting with code {EXIT_CODE} so that the job does not hang.\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)

    def run(self):
        try:
            self._connect()
        except Exception as e:  # peer checks are an addition: without them the other checks still run
            self.peer_checks = False
            sys.stderr.write(f"DDP watchdog (rank {self.rank}): peer checks off ({e}); launcher and progress "
                             "checks stay on.\n")
        last_ping = 0.0
        while not self._finished.is_set():
            now = time.monotonic()
            self._check_local()
            if self.peer_checks:
                if now - last_ping >= self.ping_s:
                    with self._lock:
                        for sock, *_ in list(self.peers.values()):
                            _send(sock, PING)
                    last_ping = now
                self._poll_peers(now)
            else:
                time.sleep(self.poll_s)

    def _check_local(self):
        if os.getppid() != self.ppid:
            self.fail(f"the launcher (pid {self.ppid}) is gone")
        if time.monotonic() - self.last_beat > self.stall_limit_s:
            self.fail(f"no training progress for {self.stall_limit_s:.0f} s (YOLO_DDP_TIMEOUT): a peer rank is "
                      "probably dead or stuck")

    def _connect(self):
        if self.world_size <= 1:
            self.peer_checks = False
            return
        deadline = time.monotonic() + self.connect_limit_s
        if self.rank == 0:
            srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind(("", self.port))  # all interfaces: ranks on other nodes connect to MASTER_ADDR
            srv.listen(self.world_size)
            srv.settimeout(1.0)
            self._server = srv
            while len(self.peers) < self.world_size - 1:
                if self._finished.is_set():
                    return
                self._check_local()
                if time.monotonic() > deadline:
                    missing = sorted(set(range(1, self.world_size)) - set(self.peers))
                    self.fail(f"ranks {missing} never reached the watchdog port {self.port} "
                              f"within {self.connect_limit_s:.0f} s")
                try:
                    conn, _ = srv.accept()
                except socket.timeout:
                    continue
                conn.settimeout(10.0)
                try:
                    conn.sendall(MAGIC)
                    peer = int(_readline(conn))
                except (OSError, ValueError):
                    _close(conn)
                    continue
                conn.setblocking(False)
                with self._lock:
                    self.peers[peer] = [conn, time.monotonic(), False]
        else:
            while True:
                if self._finished.is_set():
                    return
                self._check_local()
                try:
                    sock = socket.create_connection((self.addr, self.port), timeout=10.0)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        self.fail(f"rank 0's watchdog at {self.addr}:{self.port} not reachable within "
                                  f"{self.connect_limit_s:.0f} s")
                    time.sleep(0.5)
            if sock.recv(len(MAGIC), socket.MSG_WAITALL) != MAGIC:
                _close(sock)
                raise OSError(f"{self.addr}:{self.port} is not rank 0's watchdog (set YOLO_DDP_WATCHDOG_PORT)")
            sock.sendall(f"{self.rank}\n".encode())
            sock.setblocking(False)
            with self._lock:
                self.peers[0] = [sock, time.monotonic(), False]

    def _poll_peers(self, now):
        with self._lock:
            items = list(self.peers.items())
        if not items:
            time.sleep(self.poll_s)
            return
        socks = {p[0]: r for r, p in items}
        try:
            readable, _, _ = select.select(list(socks), [], [], self.poll_s)
        except (OSError, ValueError):  # a socket closed by finish() meanwhile
            return
        for sock in readable:
            r = socks[sock]
            try:
                data = sock.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if self._finished.is_set():
                return
            if not data:
                if not self.peers.get(r, [None, 0, True])[2]:
                    self.fail(f"rank {r} is gone (its connection closed without a goodbye): it crashed or was "
                              "killed")
                with self._lock:
                    self.peers.pop(r, None)
                _close(sock)
                continue
            with self._lock:
                if r in self.peers:
                    self.peers[r][1] = now
                    if BYE in data:
                        self.peers[r][2] = True
        with self._lock:
            silent = [r for r, (_, t, bye) in self.peers.items() if not bye and now - t > self.peer_limit_s]
        if silent:
            self.fail(f"rank {silent[0]} sent nothing for {self.peer_limit_s:.0f} s (its node is down or "
                      "unreachable)")


def _readline(sock, limit=64):
    buf = b""
    while not buf.endswith(b"\n") and len(buf) < limit:
        c = sock.recv(1)
        if not c:
            break
        buf += c
    return buf.decode().strip()


def _send(sock, data):
    try:
        sock.sendall(data)
    except OSError:
        pass  # the receiving side notices a dead link itself


def _close(sock):
    if sock is not None:
        try:
            sock.close()
        except OSError:
            pass


_WATCHDOG = None


def start(ctx, stall_limit_s=10800.0, peer_limit_s=60.0, connect_limit_s=300.0):
    """Start this rank's watchdog once (no-op in a single process); returns it or None."""
    global _WATCHDOG
    if not ctx.distributed or _WATCHDOG is not None:
        return _WATCHDOG
    _WATCHDOG = Watchdog(ctx.rank, ctx.world_size, os.environ.get("MASTER_ADDR", "127.0.0.1"), watchdog_port(),
                         stall_limit_s=stall_limit_s, peer_limit_s=peer_limit_s,
                         connect_limit_s=connect_limit_s)
    _WATCHDOG.start()
    return _WATCHDOG


def beat():
    if _WATCHDOG is not None:
        _WATCHDOG.beat()


def finish():
    global _WATCHDOG
    if _WATCHDOG is not None:
        _WATCHDOG.finish()
        _WATCHDOG = None


if __name__ == "__main__":  # the watchdog tests' stand-in rank: it only runs the watchdog, beating until killed
    start(DistContext.from_env(), stall_limit_s=DDP_TIMEOUT.get(), peer_limit_s=DDP_PEER_TIMEOUT.get())
    print(f"ready {os.getpid()}", flush=True)
    end = time.monotonic() + float(sys.argv[1]) if len(sys.argv) > 1 else float("inf")
    while time.monotonic() < end:
        beat()
        time.sleep(0.2)
    finish()
    print("finished", flush=True)
