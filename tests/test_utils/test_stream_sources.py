"""What a .streams file may open (utils/streams.py): camera indexes and rtsp/rtmp/http/https URLs, never a local
file (file://, a path, FFmpeg's other protocols) nor a link-local address (169.254.0.0/16, fe80::/10: the cloud
metadata range), each refused in one line naming the file and line. A URL given as --source itself is the user's."""
import pytest

from utils.streams import StreamError, read_sources

ALLOWED = ["0", "rtsp://127.0.0.1:9/live", "rtmp://10.0.0.5/cam", "http://192.168.1.20:8080/video",
           "https://[::1]:8443/stream", "RTSP://user:pass@127.0.0.1/h264"]


def _streams(tmp_path, *lines):
    f = tmp_path / "cams.streams"
    f.write_text("\n\n".join(lines) + "\n")  # blank lines are skipped, the line numbers are the file's
    return f


def test_cameras_and_promised_schemes_are_listed(tmp_path):
    assert read_sources(str(_streams(tmp_path, *ALLOWED))) == ALLOWED


@pytest.mark.parametrize("line", ["file:///etc/passwd", "/etc/passwd", "clip.mp4", "ftp://127.0.0.1/x",
                                  "concat:/etc/passwd|/etc/hosts", "data:text/plain,hi", "0; rm -rf /", "-1"])
def test_other_sources_are_refused(tmp_path, line):
    f = _streams(tmp_path, "0", line)
    with pytest.raises(StreamError, match=f"{f}, line 3: '.*' is not a camera index or an rtsp://") as e:
        read_sources(str(f))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://2852039166/",
                                 "rtsp://0xa9.0xfe.0xa9.0xfe/x", "https://[fe80::1]/x", "http://[::ffff:169.254.1.1]/"])
def test_link_local_addresses_are_refused_in_a_streams_file(tmp_path, url):
    f = _streams(tmp_path, url)
    with pytest.raises(StreamError, match=rf"{f}, line 1: .* link-local address (169\.254\.|fe80::)"):
        read_sources(str(f))


def test_a_url_given_on_the_command_line_is_the_users(tmp_path):
    assert read_sources("http://169.254.169.254/cam") == ["http://169.254.169.254/cam"]


def test_unreadable_streams_file_is_one_line(tmp_path):
    f = tmp_path / "bad.streams"
    f.write_bytes(b"\xff\xfe\x00rtsp")
    with pytest.raises(StreamError, match="cannot be read as a text list"):
        read_sources(str(f))
