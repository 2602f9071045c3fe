"""`output_dir: s3://bucket/prefix`: the index job publishes to an S3-compatible store (a moto
server started here on 127.0.0.1), GraphIndex reads it back, and it equals a local run."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from functools import partial
from pathlib import Path

import boto3
import moto  # noqa: F401 - the dev extra (moto[server]), installed by scripts/setup.sh
import polars as pl
import pytest
from polars.testing import assert_frame_equal

pytestmark = pytest.mark.slow


BUCKET = "docgraph-test"
URL = f"s3://{BUCKET}/idx"
QUESTIONS = ("Who discovered polonium and radium?", "Who worked with Ernest Rutherford?")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """A moto S3 server on a free 127.0.0.1 port, stopped at the end."""
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start: " + log.read_text()) from None
                time.sleep(0.2)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _objects(client) -> dict[str, bytes]:
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return {k: client.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys}


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    keys = [c for c in ("id",) if c in frame.columns] or [
        c for c, t in frame.schema.items() if t.is_numeric() or t == pl.Utf8
    ]
    return frame.sort(keys) if keys and frame.height else frame


def _lance_ids(root) -> dict[str, list[str]]:
    from pipeline.storage import store

    db = store.lance_db(root)
    return {
        name: sorted(db.open_table(name).to_arrow()["id"].to_pylist())
        for name in sorted(db.list_tables().tables)
    }


def _answers(index) -> list[tuple]:
    out = []
    for q in QUESTIONS:
        for mode in ("naive_search", "local_search"):
            r = getattr(index, mode)(q)
            out.append((mode, q, r.answer, r.context_text))
    return out


def _published(result) -> dict:
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        if mat.asset_key.to_user_string() == "published_index":
            return {k: v.value for k, v in mat.metadata.items()}
    raise AssertionError("no published_index materialization")


def test_an_s3_output_equals_the_local_run_and_publishes_incrementally(
    s3_server, tmp_path, monkeypatch, indexed_sample
):
    from dagster import DagsterInstance

    from app.run import run_index
    from pipeline import schemas
    from pipeline.config import load_settings
    from pipeline.ingest.find_stale import stale_shards
    from pipeline.query import GraphIndex
    from pipeline.storage import remote, store
    from pipeline.vectors.embed_cache import USED_DIR, compact_cache
    from pipeline.vectors.embed_onnx import cache_root

    exports = cache_root()  # this machine's model exports and token states (not the mirrors)
    secret = "sk-" + secrets.token_hex(20)  # must never be written anywhere
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "docgraph-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if exports.is_dir():  # linked, not made again (~25 s): what is new here is the mirror
        shutil.copytree(exports, cache_root(), copy_function=os.link)
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)

    inp, local_out = indexed_sample  # the local run's
    (tmp_path / "dagster").mkdir()
    instance = DagsterInstance.local_temp(str(tmp_path / "dagster"))

    timings = {}
    started = time.perf_counter()
    result = run_index(input_dir=str(inp), output_dir=URL, instance=instance, log_level="ERROR")
    timings["s3"] = time.perf_counter() - started
    assert result.success
    pushed = _published(result)
    assert pushed["store"] == URL and pushed["files_uploaded"] > 0

    # the store holds the layout: index.json, the version's tables (sharded ones as folders),
    # its Lance tables and the caches; nothing of the run's staging, lock or mirror marker
    objects = _objects(client)
    manifest = json.loads(objects["idx/index.json"])
    version = manifest["version"]
    prefix = f"idx/versions/{version}/"
    assert f"{prefix}entities.parquet" in objects
    assert any(k.startswith(f"{prefix}chunks/") and k.endswith(".parquet") for k in objects)
    assert any(k.startswith(f"{prefix}lancedb/text_units.lance/") for k in objects)
    assert any(k.startswith("idx/cache/embeddings/") for k in objects)
    assert not any("staging/" in k or ".docgraph" in k for k in objects)
    first_bytes = sum(len(v) for v in objects.values())

    # every table and every Lance table equals the local run's
    for name in schemas.TABLES:
        s3_table, local_table = store.read_table(URL, name), store.read_table(local_out, name)
        assert s3_table.height == local_table.height, name
        assert_frame_equal(_sorted(s3_table), _sorted(local_table))
    assert manifest["tables"] == store.read_manifest(local_out)["tables"]
    assert _lance_ids(URL) == _lance_ids(local_out)

    # GraphIndex reads the store; its answers equal the local index's
    index = GraphIndex.open(URL)
    local_index = GraphIndex.open(local_out)
    assert index.version == version
    assert _answers(index) == _answers(local_index)

    # another machine (an empty mirror) reads the store alone, and gets the same answers;
    # it has the model's export, as any machine that ran `docgraph index` has (without it
    # queries embed with torch, whose vectors differ from ONNX's in the last bits: enough to
    # swap two near-tied entities in a context on some CPUs)
    first = cache_root()  # the first machine's exports: linked there, or made by its run
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg2"))
    shutil.copytree(first, cache_root(), copy_function=os.link)
    assert remote.local_root(URL) != remote.local_root(URL, tmp_path / "xdg")
    assert _answers(GraphIndex.open(URL)) == _answers(local_index)

    # an incremental run from that machine, keeping one version: one edited file -> one stale
    # shard, a second version on the store (carried-over shard files copied server-side, the
    # first version deleted), and the GraphIndex open on the first machine sees the edit
    monkeypatch.setenv("DOCGRAPH_STORAGE__KEEP_VERSIONS", "1")
    edited = inp / "marie_curie.md"
    edited.write_text(
        edited.read_text(encoding="utf-8")
        + "\n\nIn 1925 Marie Curie opened the Quokkaville Radium Institute.\n",
        encoding="utf-8",
    )
    settings = load_settings(overrides={"input_dir": str(inp), "output_dir": URL})
    assert len(stale_shards(settings)) == 1
    # and its embedding cache is compacted (a bound of 2 files): merged files leave the store too
    monkeypatch.setattr("assets.publish.compact_cache", partial(compact_cache, max_files=2))
    started = time.perf_counter()
    result = run_index(input_dir=str(inp), output_dir=URL, instance=instance, log_level="ERROR")
    timings["s3_incremental"] = time.perf_counter() - started
    assert result.success
    pushed2 = _published(result)
    assert pushed2["files_copied"] > 0
    objects = _objects(client)
    manifest2 = json.loads(objects["idx/index.json"])
    assert manifest2["version"] != version and manifest2["previous"] == version
    # (pyarrow leaves an empty "idx/versions/" directory marker when it deletes a folder)
    versions_left = {k.split("/")[2] for k in objects if k.startswith("idx/versions/")}
    assert versions_left - {""} == {manifest2["version"]}
    assert pushed2["objects_deleted"] > 0
    assert pushed2["embedding_cache_files_merged"] > 0
    cache = remote.local_root(URL) / "cache" / "embeddings"
    stored = {k.split("cache/embeddings/")[1] for k in objects if "cache/embeddings/" in k}
    stored = {k for k in stored if not k.endswith("/")}  # (a folder marker)
    assert stored == {str(p.relative_to(cache)) for p in cache.rglob("*.parquet")}
    vectors = {k for k in stored if f"/{USED_DIR}/" not in k}  # (not the records of use)
    assert len(vectors) == 1  # one model: its files down to max_files / 2
    time.sleep(remote.REFRESH_EVERY_S)
    hit = index.naive_search("Quokkaville Radium Institute")
    assert "Quokkaville" in hit.context_text
    assert index.latest().version == manifest2["version"]

    # no credential anywhere: the store, the mirror, the Dagster instance
    needle = secret.encode()
    assert not any(needle in body for body in objects.values())
    for folder in (tmp_path / "xdg", tmp_path / "xdg2", tmp_path / "dagster", local_out):
        for path in Path(folder).rglob("*"):
            if path.is_file():
                assert needle not in path.read_bytes(), path
    print(
        f"\nobject storage: s3 run {timings['s3']:.1f}s, "
        f"s3 incremental {timings['s3_incremental']:.1f}s; first publish "
        f"{pushed['files_uploaded']} files / {pushed['bytes_uploaded']} B "
        f"(+ cache {pushed['cache_files_uploaded']} files / {pushed['cache_bytes_uploaded']} B), "
        f"bucket {first_bytes} B; incremental: {pushed2['files_uploaded']} uploaded / "
        f"{pushed2['bytes_uploaded']} B, {pushed2['files_copied']} copied server-side / "
        f"{pushed2['bytes_copied']} B, {pushed2['objects_deleted']} objects deleted"
    )


def test_a_writer_never_publishes_over_a_version_published_since_its_pull(
    s3_server, tmp_path, monkeypatch
):
    """Two machines' runs on one store, overlapping: the second to publish finds the store
    moved on since its pull and publishes nothing (its uploads deleted); and a version
    another writer is still uploading is never deleted by a publish that prunes."""
    from pipeline.storage import remote
    from pipeline.storage.object_store import RemoteError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "docgraph-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "docgraph-test-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    bucket, url = "docgraph-race", "s3://docgraph-race/idx"
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    machine_a = remote.local_root(url, tmp_path / "a")
    machine_b = remote.local_root(url, tmp_path / "b")

    def build(mirror: Path, version: str, keep: int = 3) -> dict:
        """A run's local publish in `mirror`: a version folder, index.json naming it."""
        previous = (
            json.loads((mirror / "index.json").read_text())["version"]
            if (mirror / "index.json").exists()
            else None
        )
        (mirror / "versions" / version).mkdir(parents=True)
        (mirror / "versions" / version / "t.parquet").write_bytes(version.encode())
        for old in sorted((mirror / "versions").iterdir())[:-keep]:
            shutil.rmtree(old)
        manifest = {"version": version, "previous": previous, "tables": {}}
        (mirror / "index.json").write_text(json.dumps(manifest))
        return manifest

    def store() -> tuple[str, set[str]]:
        keys = set()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys |= {o["Key"] for o in page.get("Contents", [])}
        body = client.get_object(Bucket=bucket, Key="idx/index.json")["Body"].read()
        return json.loads(body)["version"], {
            k.split("/")[2] for k in keys if k.startswith("idx/versions/") and not k.endswith("/")
        }

    remote.pull(machine_a, caches=True)
    remote.push(machine_a, build(machine_a, "v1"))
    remote.pull(machine_b, caches=True)  # b's run starts on v1 ...
    remote.pull(machine_a, caches=True)
    remote.push(machine_a, build(machine_a, "v2"))  # ... a's run publishes v2 meanwhile
    with pytest.raises(
        RemoteError,
        match="another writer published version v2 after this run "
        "pulled version v1; this run's version v3 is not published",
    ):
        remote.push(machine_b, build(machine_b, "v3"))
    assert store() == ("v2", {"v1", "v2"})  # v3's uploads gone, v2 whole and current

    remote.pull(machine_b, caches=True)  # b's next run starts from v2 and publishes
    remote.push(machine_b, build(machine_b, "v4"))
    assert store() == ("v4", {"v1", "v2", "v4"})

    remote.pull(machine_a, caches=True)  # a prunes to one version while ...
    client.put_object(Bucket=bucket, Key="idx/versions/v5/t.parquet", Body=b"v5")  # ... b uploads
    remote.push(machine_a, build(machine_a, "v6", keep=1))
    assert store() == ("v6", {"v5", "v6"})
