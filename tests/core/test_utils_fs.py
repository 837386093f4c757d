"""trainbus.utils.fs: mkdir_p, recursive_walk, get_dataset_path, normpath and download (local servers only)."""

from __future__ import annotations

import http.server
import os
import threading

import pytest

from ports import free_ports
from trainbus.utils import fs
from trainbus.utils.fs import DownloadError, download, get_dataset_path, mkdir_p, normpath, recursive_walk


class _Handler(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    requests: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).requests.append(self.path)
        if self.path == "/short.bin":
            # announce more bytes than are sent, then close: a broken transfer
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x" * 10)
            self.wfile.flush()
            self.close_connection = True
            return
        body = self.files.get(self.path)
        if body is None:
            self.send_error(404, "Not Found")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Handler.files = {"/data/blob.bin": bytes(range(256)) * 40, "/empty.bin": b""}
    _Handler.requests = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    t.join()


def test_mkdir_p(tmp_path):
    d = tmp_path / "a" / "b" / "c"
    mkdir_p(str(d))
    assert d.is_dir()
    mkdir_p(str(d))  # exists: nothing happens
    mkdir_p("")
    with pytest.raises(ValueError, match="dirname is None"):
        mkdir_p(None)
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError):
        mkdir_p(str(tmp_path / "file"))


def test_recursive_walk(tmp_path):
    for rel in ["a.txt", "d/b.txt", "d/e/c.txt"]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel)
    got = sorted(os.path.relpath(p, tmp_path) for p in recursive_walk(str(tmp_path)))
    assert got == ["a.txt", os.path.join("d", "b.txt"), os.path.join("d", "e", "c.txt")]


def test_get_dataset_path_env_order(tmp_path, monkeypatch):
    tb, tp = tmp_path / "tb", tmp_path / "tp"
    tb.mkdir()
    tp.mkdir()
    monkeypatch.setenv("TRAINBUS_DATASET", str(tb))
    monkeypatch.setenv("TENSORPACK_DATASET", str(tp))
    assert get_dataset_path("mnist_data", "x.gz") == os.path.join(str(tb), "mnist_data", "x.gz")
    monkeypatch.delenv("TRAINBUS_DATASET")
    assert get_dataset_path("cifar10_data") == os.path.join(str(tp), "cifar10_data")
    assert get_dataset_path() == str(tp)


def test_get_dataset_path_default_and_bad_env(tmp_path, monkeypatch):
    monkeypatch.delenv("TRAINBUS_DATASET", raising=False)
    monkeypatch.delenv("TENSORPACK_DATASET", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert get_dataset_path("svhn_data") == os.path.join(str(tmp_path), "tensorpack_data", "svhn_data")
    assert (tmp_path / "tensorpack_data").is_dir()
    monkeypatch.setenv("TENSORPACK_DATASET", str(tmp_path / "nope"))
    with pytest.raises(NotADirectoryError, match=r"\$TENSORPACK_DATASET=.*nope.* is not a directory"):
        get_dataset_path("x")


def test_normpath():
    assert normpath("a//b/../c/") == os.path.normpath("a//b/../c/")
    assert normpath("gs://bucket//x/../y") == "gs://bucket//x/../y"


def test_download_success_and_skip(server, tmp_path):
    out = tmp_path / "dl"
    p = download(server + "/data/blob.bin", str(out))
    assert p == os.path.join(str(out), "blob.bin")
    assert open(p, "rb").read() == bytes(range(256)) * 40
    assert os.listdir(out) == ["blob.bin"]  # no temporary left behind
    assert _Handler.requests == ["/data/blob.bin"]
    # the right size already there: no request
    assert download(server + "/data/blob.bin", str(out), expect_size=10240) == p
    assert _Handler.requests == ["/data/blob.bin"]
    # another name, and a size that does not match the existing file: downloaded again
    p2 = download(server + "/data/blob.bin", str(out), filename="renamed.bin", expect_size=10240)
    assert os.path.basename(p2) == "renamed.bin" and os.path.getsize(p2) == 10240
    open(p, "wb").write(b"stale")
    download(server + "/data/blob.bin", str(out), expect_size=10240)
    assert os.path.getsize(p) == 10240
    assert _Handler.requests == ["/data/blob.bin"] * 3


def test_download_unreachable_names_url_file_and_env(tmp_path):
    url = f"http://127.0.0.1:{free_ports(1)[0]}/exdb/train-images-idx3-ubyte.gz"
    with pytest.raises(DownloadError) as ei:
        download(url, str(tmp_path), timeout=5)
    msg = str(ei.value)
    target = os.path.join(str(tmp_path), "train-images-idx3-ubyte.gz")
    assert url in msg and target in msg and "not reachable" in msg
    assert "$TRAINBUS_DATASET" in msg and "$TENSORPACK_DATASET" in msg and "put it at" in msg
    assert ei.value.url == url and ei.value.path == target
    assert os.listdir(tmp_path) == []


def test_download_http_error_empty_and_short(server, tmp_path):
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(server + "/missing.gz", str(tmp_path))
    with pytest.raises(DownloadError, match="empty file"):
        download(server + "/empty.bin", str(tmp_path))
    with pytest.raises(DownloadError, match=r"short\.bin.*(1000 bytes but sent 10|connection broke)"):
        download(server + "/short.bin", str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_existing_atomic_writes_still_work(tmp_path):
    p = tmp_path / "sub" / "f.txt"
    fs.atomic_write_text(str(p), "hello")
    assert p.read_text() == "hello"
    fs.atomic_write_bytes(str(p), b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    assert sorted(os.listdir(p.parent)) == ["f.txt"]
