"""An http server on 127.0.0.1 for the stream tests: serves a folder from a daemon thread, so that a video can stand
in for a network camera (OpenCV's FFmpeg reads it as an http stream)."""
import functools
import http.server
import threading


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve_folder(folder):
    """Start serving folder; returns its base URL ('http://127.0.0.1:PORT'). The thread ends with the process."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True, name="test stream server").start()
    return f"http://127.0.0.1:{server.server_address[1]}"
