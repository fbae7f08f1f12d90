import hashlib
import zipfile

import pytest

from sgl.datasets import default_root, fetch, load_planetoid, load_tu
from sgl.datasets import download as download_module
from sgl.datasets import planetoid as planetoid_module
from sgl.datasets import tu as tu_module
from sgl.datasets.download import extract_zip
from sgl.errors import DatasetError, DownloadError

CORA_FILES = [f"ind.cora.{p}" for p in ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")]


def test_default_root(monkeypatch, tmp_path):
    monkeypatch.setenv("SGL_DATA", str(tmp_path / "d"))
    assert default_root() == (tmp_path / "d").resolve()
    monkeypatch.delenv("SGL_DATA")
    assert default_root().parts[-2:] == (".sgl", "datasets")


def test_fetch_file_url_and_checksum(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload")
    good = hashlib.sha256(b"payload").hexdigest()
    assert fetch(src.as_uri(), tmp_path / "out" / "a.bin", sha256=good).read_bytes() == b"payload"
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        fetch(src.as_uri(), tmp_path / "out" / "b.bin", sha256="0" * 64)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.bin"]  # no partial file left


def test_fetch_failure_names_url(tmp_path):
    with pytest.raises(DownloadError, match="could not download https://example.invalid/x.bin"):
        fetch("https://example.invalid/x.bin", tmp_path / "x.bin")
    assert not (tmp_path / "x.bin").exists()


def test_missing_files_message(tmp_path, monkeypatch):
    def refuse(url, path, sha256=None, timeout=None):
        raise DownloadError(f"could not download {url}: offline")

    monkeypatch.setattr(download_module, "fetch", refuse)
    with pytest.raises(DownloadError) as err:
        load_planetoid("cora", root=tmp_path)
    message = str(err.value)
    assert "https://github.com/kimiyoung/planetoid/raw/master/data/ind.cora.x" in message
    for name in CORA_FILES:
        assert name in message
    assert str(tmp_path / "cora" / "raw") in message and message.endswith("and retry.")


def test_missing_files_message_default_root(tmp_path, monkeypatch):
    monkeypatch.setenv("SGL_DATA", str(tmp_path / "store"))
    with pytest.raises(DownloadError, match="network access is disabled") as err:
        load_planetoid("citeseer")
    assert str((tmp_path / "store").resolve() / "citeseer" / "raw") in str(err.value)
    with pytest.raises(DatasetError, match="ind.citeseer.x"):
        load_planetoid("citeseer", download=False)


def test_download_verifies_and_places_files(data_path, tmp_path, monkeypatch):
    cora = data_path("planetoid")
    monkeypatch.setattr(planetoid_module, "_URL", cora.as_uri())
    g = load_planetoid("cora", root=tmp_path)
    assert g.num_nodes == 2708
    assert sorted(p.name for p in (tmp_path / "cora" / "raw").iterdir()) == sorted(CORA_FILES)


def test_download_rejects_bad_checksum(tmp_path, monkeypatch):
    fake = tmp_path / "server"
    fake.mkdir()
    for name in CORA_FILES:
        (fake / name).write_bytes(b"not the real file")
    monkeypatch.setattr(planetoid_module, "_URL", fake.as_uri())
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        load_planetoid("cora", root=tmp_path / "data")
    assert not any((tmp_path / "data" / "cora" / "raw").iterdir())


def test_partial_copy_completed_in_place(data_path, tmp_path, monkeypatch):
    cora = data_path("planetoid")
    (tmp_path / "ind.cora.x").write_bytes((cora / "ind.cora.x").read_bytes())
    monkeypatch.setattr(planetoid_module, "_URL", cora.as_uri())
    assert load_planetoid("cora", root=tmp_path).num_nodes == 2708
    assert (tmp_path / "ind.cora.graph").is_file()


def test_tu_zip_download(data_path, tmp_path, monkeypatch):
    mutag = data_path("tu", "MUTAG")
    server = tmp_path / "server"
    server.mkdir()
    with zipfile.ZipFile(server / "MUTAG.zip", "w") as zf:
        for path in mutag.iterdir():
            zf.write(path, f"MUTAG/{path.name}")
    monkeypatch.setattr(tu_module, "_URL", server.as_uri())
    ds = load_tu("MUTAG", root=tmp_path / "data")
    assert len(ds) == 188
    assert (tmp_path / "data" / "MUTAG" / "raw" / "MUTAG_A.txt").is_file()


def test_tu_download_failure_message(tmp_path):
    with pytest.raises(DownloadError) as err:
        load_tu("NCI1", root=tmp_path)
    message = str(err.value)
    assert "https://www.chrsmrrs.com/graphkerneldatasets/NCI1.zip" in message
    assert "NCI1_A.txt" in message and "NCI1_graph_labels.txt" in message
    assert str(tmp_path / "NCI1" / "raw") in message
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # nothing half-written


def test_extract_zip_rejects_escaping_members(tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../outside.txt", "x")
    with pytest.raises(DatasetError, match="outside"):
        extract_zip(archive, tmp_path / "out")
    assert not (tmp_path / "outside.txt").exists()


def test_extract_corrupt_zip(tmp_path):
    archive = tmp_path / "bad.zip"
    archive.write_bytes(b"PK\x03\x04 definitely not a zip")
    with pytest.raises(DatasetError, match=r"bad\.zip is truncated or corrupt"):
        extract_zip(archive, tmp_path / "out")
