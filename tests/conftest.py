"""Shared fixtures: the conformance corpus is read from ../shared at test time, never committed."""

from __future__ import annotations

import os
import ssl
import tarfile
from pathlib import Path

import pytest
import trustme

REPO = Path(__file__).resolve().parent.parent


def corpus_archive() -> Path | None:
    """Where the conformance pack lives: ``POLANG_CORPUS`` or ``../shared/conformance``."""
    env = os.environ.get("POLANG_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "conformance" / "polang-corpus.tar.gz")
    for c in candidates:
        if c.is_file():
            return c
    return None


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    archive = corpus_archive()
    if archive is None:
        pytest.skip(
            "conformance pack not found (expected ../shared/conformance/polang-corpus.tar.gz)"
        )
    dest = tmp_path_factory.mktemp("corpus")
    with tarfile.open(archive) as tf:
        tf.extractall(dest, filter="data")
    return dest


# ---------------------------------------------------------------- TLS for loopback servers
# One certificate authority per run (trustme): servers present a certificate for localhost
# and 127.0.0.1, clients trust the authority.


@pytest.fixture(scope="session")
def tls_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="session")
def server_ssl_context(tls_ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls_ca.issue_cert("localhost", "127.0.0.1").configure_cert(ctx)
    return ctx


@pytest.fixture(scope="session")
def client_ssl_context(tls_ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    tls_ca.configure_trust(ctx)
    return ctx


@pytest.fixture(scope="session")
def ca_pem_file(tls_ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    tls_ca.cert_pem.write_to_path(str(path))
    return path
