"""Chroma's server (the chromadb package from PyPI, requirements-dev.txt) for the tests and the
benchmark: `chroma run` on a free loopback port, its data in a folder of the caller's, anonymous
telemetry off (Chroma's documented `ANONYMIZED_TELEMETRY=False`), no proxy. Documents are added
over its HTTP API v2 with vectors the caller computed (the collection's own encoder): Chroma
embeds nothing (its default embedding function, which would download weights, lives in its
Python client, which is not used). The outside source reads it through the preset descriptor
examples/sources/chroma.json, its URL pointed at this server and collection.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from retrieval.sources.external import Descriptor, parse_descriptor

REPO = Path(__file__).resolve().parents[1]
PRESET = REPO / "examples" / "sources" / "chroma.json"
CHROMA = Path(sys.executable).parent / "chroma"  # the chromadb package's server CLI
TENANT = "/api/v2/tenants/default_tenant/databases/default_database"


class Chroma:
    """A `chroma run` server on a free loopback port, its data in `path`."""

    def __init__(self, path: Path):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.collection_id = ""
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env["ANONYMIZED_TELEMETRY"] = "False"
        self.log = path / "chroma.out"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(CHROMA), "run", "--path", str(path / "db"), "--host", "127.0.0.1", "--port", str(self.port)],
                cwd=path, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(self.base + "/api/v2/heartbeat", timeout=2).is_success:
                    break
            except httpx2.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("chroma run did not start: " + self.log.read_text(errors="replace")[-2000:])
            time.sleep(0.1)

    def post(self, path: str, body: dict) -> dict:
        response = httpx2.post(self.base + TENANT + path, json=body, timeout=30)
        if not response.is_success:
            raise RuntimeError(f"chroma answered {response.status_code}: {response.text[:500]}")
        return response.json()

    def load(self, name: str, documents, vectors) -> None:
        """A cosine-space collection `name` holding `documents` (id, title, text) with `vectors`."""
        collection = self.post("/collections", {"name": name, "configuration": {"hnsw": {"space": "cosine"}}})
        self.post(f"/collections/{collection['id']}/add", {
            "ids": [d.id for d in documents], "embeddings": [[float(x) for x in v] for v in vectors],
            "documents": [d.text for d in documents], "metadatas": [{"title": d.title} for d in documents]})
        self.collection_id = collection["id"]

    def query(self, vector, n_results: int) -> dict:
        """Chroma's own answer (POST …/query) for one query vector."""
        return self.post(f"/collections/{self.collection_id}/query", {
            "query_embeddings": [[float(x) for x in vector]], "n_results": n_results, "include": ["distances"]})

    def descriptor(self) -> Descriptor:
        """The preset descriptor (examples/sources/chroma.json) pointed at this server and collection."""
        text = PRESET.read_text(encoding="utf-8")
        return parse_descriptor(text.replace("http://127.0.0.1:8000", self.base)
                                .replace("COLLECTION_ID", self.collection_id))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
