"""Multi-issuer authorization end to end, with two real OpenID providers on loopback.

Run: ``python examples/multi_issuer/run.py [--store-dir DIR]``. Nothing leaves this machine:

1. A private certificate authority and a certificate for ``localhost`` are made with
   ``cryptography``; two small OpenID providers (``Acme``, signing with RSA, and
   ``Partner``, signing with EC P-256) serve their discovery document and JWKS over HTTPS.
2. A directory policy store is written (to a temporary directory unless ``--store-dir``):
   both providers as trusted issuers, three token types (``Acme::Access_token``,
   ``Acme::Id_token``, ``Partner::Access_token``), and policies that read the tokens with
   ``context.tokens.<name>.hasTag(...)`` / ``getTag(...)``.
3. The engine (told to trust the private CA) decides requests carrying tokens signed by the
   providers; each decision is printed with its reasons and the tokens it dropped.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import json
import ssl
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from polang import Engine, TokenError, TokenInput

# ---------------------------------------------------------------- TLS for loopback


def make_tls(workdir: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context): a fresh CA and a ``localhost`` certificate."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "polang example CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (workdir / "ca.pem").write_bytes(ca_cert.public_bytes(pem))
    (workdir / "server.pem").write_bytes(
        cert.public_bytes(pem)
        + key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(workdir / "server.pem")
    client = ssl.create_default_context(cafile=str(workdir / "ca.pem"))
    return server, client


# ---------------------------------------------------------------- a small OpenID provider


class Provider:
    """Discovery and JWKS over HTTPS on 127.0.0.1; signs tokens with its one key."""

    def __init__(self, name: str, alg: str, tls: ssl.SSLContext) -> None:
        self.name = name
        self.alg = alg
        self.kid = f"{name.lower()}-key-1"
        if alg == "RS256":
            self.key: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        else:
            self.key = ec.generate_private_key(ec.SECP256R1())
            jwk = json.loads(ECAlgorithm.to_jwk(self.key.public_key()))
        jwk.update({"kid": self.kid, "alg": alg, "use": "sig"})
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body: dict[str, Any]
                if self.path == f"/{provider.name.lower()}/.well-known/openid-configuration":
                    body = {"issuer": provider.issuer, "jwks_uri": f"{provider.issuer}/jwks"}
                elif self.path == f"/{provider.name.lower()}/jwks":
                    body = {"keys": [jwk]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def issuer(self) -> str:
        return f"https://localhost:{self.port}/{self.name.lower()}"

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    def token(self, key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        body = {
            "iss": self.issuer,
            "sub": "user-42",
            "aud": "docs-app",
            "jti": uuid.uuid4().hex,
            "iat": now,
            "exp": now + 600,
            **claims,
        }
        return jwt.encode(body, key or self.key, algorithm=self.alg, headers={"kid": self.kid})

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------- the store

TOKEN_SHAPE = """{
        "token_type"?: String,
        "jti"?: String,
        "iss"?: TrustedIssuer,
        "exp"?: Long,
        "validated_at"?: Long,
    } tags Set<String>"""

SCHEMA = f"""// Documents guarded by tokens of two issuers. Each issuer has its own namespace with a
// TrustedIssuer type; token types declare `tags Set<String>`; contexts carry `tokens?`.
namespace Acme {{
    type Url = {{ "host": String, "path": String, "protocol": String }};
    entity TrustedIssuer = {{ "issuer_entity_id": Url }};
    entity Access_token = {TOKEN_SHAPE};
    entity Id_token = {TOKEN_SHAPE};
    type TokensContext = {{
        "total_token_count": Long,
        "acme_access_token"?: Access_token,
        "acme_id_token"?: Id_token,
        "partner_access_token"?: Partner::Access_token,
    }};
    entity User;
    entity Document = {{ "classification": String }};
    action "read", "comment" appliesTo {{
        principal: [User],
        resource: [Document],
        context: {{ "tokens"?: TokensContext }},
    }};
}}
namespace Partner {{
    type Url = {{ "host": String, "path": String, "protocol": String }};
    entity TrustedIssuer = {{ "issuer_entity_id": Url }};
    entity Access_token = {TOKEN_SHAPE};
}}
"""

POLICIES = """// Acme staff read documents with an access token carrying the docs:read scope.
@id("read-with-scope")
permit (principal, action == Acme::Action::"read", resource is Acme::Document)
when {
    context has tokens.acme_access_token &&
    context.tokens.acme_access_token.hasTag("scope") &&
    context.tokens.acme_access_token.getTag("scope").contains("docs:read")
};

// Reviewers at the partner company may comment.
@id("partner-reviewers-comment")
permit (principal, action == Acme::Action::"comment", resource is Acme::Document)
when {
    context has tokens.partner_access_token &&
    context.tokens.partner_access_token.hasTag("role") &&
    context.tokens.partner_access_token.getTag("role").contains("reviewer")
};

// Secret documents need a second factor, shown by the id token's `amr` claim.
@id("secret-needs-mfa")
forbid (principal, action, resource is Acme::Document)
when { resource.classification == "secret" }
unless {
    context has tokens.acme_id_token &&
    context.tokens.acme_id_token.hasTag("amr") &&
    context.tokens.acme_id_token.getTag("amr").contains("mfa")
};
"""


def write_store(root: Path, acme: Provider, partner: Provider) -> Path:
    issuers = {
        "acme": {
            "name": "Acme",
            "description": "Acme's workforce identity provider",
            "openid_configuration_endpoint": acme.discovery_url,
            "token_metadata": {
                "access_token": {
                    "entity_type_name": "Acme::Access_token",
                    "required_claims": ["exp", "jti"],
                },
                "id_token": {"entity_type_name": "Acme::Id_token"},
            },
        },
        "partner": {
            "name": "Partner",
            "description": "a partner company's identity provider",
            "openid_configuration_endpoint": partner.discovery_url,
            "token_metadata": {"access_token": {"entity_type_name": "Partner::Access_token"}},
        },
    }
    metadata = {
        "polang_version": "4.0.0",
        "policy_store": {
            "id": "multi-issuer-docs",
            "name": "Documents with two issuers",
            "version": "1.0.0",
            "created_date": "2025-01-01T00:00:00Z",
            "updated_date": "2025-01-01T00:00:00Z",
        },
    }
    files = {
        "metadata.json": json.dumps(metadata, indent=2),
        "schema.polangschema": SCHEMA,
        "policies/documents.polang": POLICIES,
        "trusted-issuers/issuers.json": json.dumps(issuers, indent=2),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


# ---------------------------------------------------------------- the requests


@contextmanager
def providers(tls: ssl.SSLContext) -> Iterator[tuple[Provider, Provider]]:
    acme = Provider("Acme", "RS256", tls)
    partner = Provider("Partner", "ES256", tls)
    try:
        yield acme, partner
    finally:
        acme.stop()
        partner.stop()


def doc(uid: str, classification: str = "internal") -> dict[str, Any]:
    return {
        "uid": {"type": "Acme::Document", "id": uid},
        "attrs": {"classification": classification},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store-dir",
        help="write the store here to look at it (default: a temp directory); its issuer "
        "URLs only work while this script runs",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="polang-multi-issuer-") as tmp:
        work = Path(tmp)
        server_tls, client_tls = make_tls(work)
        with providers(server_tls) as (acme, partner):
            store = write_store(Path(args.store_dir or work / "store"), acme, partner)
            print(f"providers: {acme.issuer} (RS256), {partner.issuer} (ES256)")
            print(f"store: {store}")
            config = {"ENGINE_POLICY_STORE_LOCAL_FN": str(store), "ENGINE_HTTP_MAX_RETRIES": 0}
            with Engine(config, ssl_context=client_tls) as engine:
                run_requests(engine, acme, partner)


def run_requests(engine: Engine, acme: Provider, partner: Provider) -> None:
    read, comment = 'Acme::Action::"read"', 'Acme::Action::"comment"'
    access = "Acme::Access_token"
    id_token = "Acme::Id_token"
    partner_access = "Partner::Access_token"
    now = int(time.time())
    reader = TokenInput(access, acme.token(scope=["docs:read", "profile"]))
    mfa = TokenInput(id_token, acme.token(amr=["pwd", "mfa"]))
    reviewer = TokenInput(partner_access, partner.token(role=["reviewer"]))
    stranger = ec.generate_private_key(ec.SECP256R1())  # not the partner's key

    cases: list[tuple[str, list[TokenInput], str, dict[str, Any]]] = [
        ("read with the docs:read scope", [reader], read, doc("plan")),
        (
            "read with only the profile scope",
            [TokenInput(access, acme.token(scope="profile"))],
            read,
            doc("plan"),
        ),
        ("read a secret document without MFA", [reader], read, doc("vault", "secret")),
        ("read a secret document with MFA", [reader, mfa], read, doc("vault", "secret")),
        ("partner reviewer comments", [reviewer], comment, doc("plan")),
        (
            "partner viewer comments",
            [TokenInput(partner_access, partner.token(role="viewer"))],
            comment,
            doc("plan"),
        ),
        (
            "three tokens, two of them bad: the good one decides",
            [
                TokenInput(access, acme.token(exp=now - 60, scope=["docs:read"])),
                TokenInput(partner_access, partner.token(key=stranger, role=["reviewer"])),
                reviewer,
            ],
            comment,
            doc("plan"),
        ),
    ]
    for text, tokens, action, resource in cases:
        result = engine.authorize_multi_issuer(tokens, action, resource)
        reasons = result.response.diagnostics.reason
        line = f"{result.response.decision.upper():5}  {text}"
        if reasons:
            line += f"  [{', '.join(reasons)}]"
        print(line)
        for d in result.dropped_tokens or []:
            print(f"       dropped token {d.index} ({d.mapping}): {d.kind}: {d.message}")

    # When no token survives there is nothing to decide with: an exception lists why.
    try:
        engine.authorize_multi_issuer(
            [TokenInput(access, acme.token(nbf=now + 3600))], read, doc("plan")
        )
    except TokenError as e:
        print(f"rejected: {e}")


if __name__ == "__main__":
    main()
