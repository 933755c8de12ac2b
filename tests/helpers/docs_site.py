"""The docs site for the tests: build it with MkDocs from a clean copy of the project, serve it on 127.0.0.1, and
look at its pages in headless Chromium through the Chrome DevTools Protocol (a small WebSocket client on the standard
library: no browser-driver package to install)."""
import base64
import contextlib
import functools
import http.server
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from tests.helpers.markdown_blocks import project_files

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def in_ci():
    """CI sets CI=true: there, a missing MkDocs or Chromium is a failure of the set-up, not a reason to skip."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


# -------------------------------------------------------------------------------------------------------- build
def mkdocs_missing(python=sys.executable):
    """None when `python -m mkdocs` and the Material theme are importable, else why not."""
    probe = subprocess.run([python, "-c", "import mkdocs, material"], capture_output=True, text=True)
    if probe.returncode:
        return (f"MkDocs with the Material theme is not installed in {python} "
                f"({probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else 'import failed'})")
    return None


def clean_copy(root, dst):
    """The project's files as a fresh clone holds them (tracked and new, not ignored), nothing built."""
    for rel in project_files(root):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(root) / rel, dst / rel)
    return dst


def build_site(root, work, python=sys.executable, timeout=300):
    """`mkdocs build --strict` of a clean copy of root; returns (site folder, build output). Raises AssertionError
    with the build's output when it fails."""
    copy = clean_copy(root, Path(work) / "project")
    site = Path(work) / "site"
    p = subprocess.run([python, "-m", "mkdocs", "build", "--strict", "--config-file", str(copy / "mkdocs.yml"),
                        "--site-dir", str(site)], cwd=copy, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"mkdocs build --strict failed (exit status {p.returncode}):\n{out[-6000:]}"
    return site, out


_LOCAL_REF = re.compile(r"""<(?:img|script|link|source)\b[^>]*?\b(?:src|href)=["']([^"'#?]+)""", re.I)


def missing_local_files(site):
    """(page, reference) for each image, script or stylesheet a built page names that is not in the site."""
    site = Path(site)
    missing = []
    for page in sorted(site.rglob("*.html")):
        for ref in _LOCAL_REF.findall(page.read_text(encoding="utf-8", errors="replace")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", ref, re.I) or ref.startswith("//"):
                continue  # an absolute URL: the browser test sees whether it is reached
            target = (site / ref.lstrip("/")) if ref.startswith("/") else (page.parent / ref)
            if not target.exists():
                missing.append((page.relative_to(site).as_posix(), ref))
    return missing


# -------------------------------------------------------------------------------------------------------- serve
class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(folder):
    """Serve folder on 127.0.0.1 at a free port (Python's http.server in a thread); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# -------------------------------------------------------------------------------------------- a WebSocket client
class WebSocket:
    """The client side of RFC 6455, enough for the DevTools protocol: text frames, masked as a client must send them,
    fragmented and large frames read back, pings answered."""

    def __init__(self, url, timeout=30):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((m[1], int(m[2])), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {m[3]} HTTP/1.1\r\nHost: {m[1]}:{m[2]}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"{url}: the connection closed during the WebSocket handshake")
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError(f"{url}: no WebSocket upgrade: {head[:200]!r}")

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise ConnectionError("the browser closed the DevTools connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _send_frame(self, opcode, payload):
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send(self, text):
        self._send_frame(0x1, text.encode())

    def receive(self):
        """The next whole text message (continuation frames joined)."""
        message = b""
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("the browser closed the DevTools connection")
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80:
                    return message.decode()

    def close(self):
        with contextlib.suppress(OSError):
            self._send_frame(0x8, b"")
        self.sock.close()


# ---------------------------------------------------------------------------------------------------- Chromium
def find_chromium():
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Page:
    """One browser tab driven over the DevTools protocol; keeps the console errors, uncaught exceptions and failed
    loads it sees."""

    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.events = []
        self.errors = []
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def _note(self, event):
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.errors.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.errors.append(f"uncaught: {d.get('exception', {}).get('description') or d.get('text')} "
                               f"({d.get('url', '')}:{d.get('lineNumber', '')})")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            e = params["entry"]
            self.errors.append(f"{e.get('source')}: {e.get('text')} {e.get('url', '')}".strip())
        self.events.append(event)

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.receive())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._note(msg)
        raise TimeoutError(f"{method}: no answer in {timeout} s")

    def wait_event(self, method, timeout=30):
        deadline = time.monotonic() + timeout
        self.ws.sock.settimeout(timeout)
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.receive())
            self._note(msg)
            if msg.get("method") == method:
                return msg.get("params", {})
        raise TimeoutError(f"no {method} in {timeout} s")

    def evaluate(self, expression, timeout=30):
        """The JSON value of a JavaScript expression (awaited when it is a promise)."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      timeout)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression[:80]}...: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    def open(self, url, settle=1.0, timeout=60):
        """Navigate and wait for the load event, then for settle seconds of late scripts and requests."""
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", timeout)
        self.idle(settle)

    def idle(self, seconds):
        """Read events for `seconds` (console errors that come late, e.g. from a web worker)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.ws.sock.settimeout(left)
            try:
                self._note(json.loads(self.ws.receive()))
            except (TimeoutError, socket.timeout):
                break
        self.ws.sock.settimeout(30)

    def close(self):
        self.ws.close()


@contextlib.contextmanager
def chromium(binary, profile, timeout=60):
    """Headless Chromium with a DevTools port; yields a Page on its first tab. Every host but 127.0.0.1 resolves to
    nothing, so a page that needs the network (web fonts, a CDN script) shows it as a failed load."""
    argv = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--mute-audio", f"--user-data-dir={profile}",
            "--remote-debugging-port=0", "--remote-allow-origins=*",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "about:blank"]
    log = open(Path(profile).parent / "chromium.log", "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    page = None
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = (Path(profile).parent / "chromium.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{binary} did not open its DevTools port (exit status {proc.poll()}):\n{tail}")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        tab = next(t for t in targets if t.get("type") == "page")
        page = Page(tab["webSocketDebuggerUrl"])
        yield page
    finally:
        if page is not None:
            page.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


IMAGES_JS = """Array.from(document.images).map(i => ({src: i.currentSrc || i.src, complete: i.complete,
                                                      width: i.naturalWidth}))"""

# Material for MkDocs' search: the box is input.md-search__input (opened by focusing it); a web worker indexes
# search/search_index.json and the results are li.md-search-result__item under .md-search-result__meta
SEARCH_RESULTS_JS = """(() => {
  const items = Array.from(document.querySelectorAll('.md-search-result__item'));
  const meta = document.querySelector('.md-search-result__meta');
  return {count: items.length, meta: meta ? meta.textContent.trim() : null,
          first: items.slice(0, 5).map(li => (li.querySelector('a') || {}).href || '')};
})()"""


def search(page, query, timeout=20):
    """Type query into the site's search box as a reader would; returns the results once some show (or the last
    state seen when none come in timeout seconds)."""
    page.evaluate("(() => { const i = document.querySelector('input.md-search__input'); if (!i) throw "
                  "new Error('no search box (input.md-search__input) on the page'); i.focus(); i.click(); })()")
    page.call("Input.insertText", {"text": query})
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = page.evaluate(SEARCH_RESULTS_JS)
        if state["count"]:
            return state
        page.idle(0.25)
    return state
