"""The public engine side by side with cedarling-python: start-up, unsigned, multi-issuer.

Usage::

    python benchmarks/bench_engine.py [--requests N] [--startups N] [--json]

cedarling-python (``pip install cedarling-python``) is the Rust engine's Python binding with
the same operations and the same policy store layout under Cedar's names. Both engines get
the same small store, written twice from one definition: for polang a directory with
``schema.polangschema``, ``policies/*.polang``, ``metadata.json`` (``polang_version``) and
``trusted-issuers/issuers.json`` (a map of issuer id to record); for cedarling the same text
as ``schema.cedarschema``, ``policies/*.cedar``, ``metadata.json`` (``cedar_version``) and one
file per issuer in ``trusted-issuers/`` (cedarling's layout; the store id is hexadecimal, as
cedarling requires). Two issuers, three token types (``Bench::Access_token``,
``Bench::Id_token``, ``Partner::Access_token``), nine policies; multi-issuer requests use a
second store of the five policies that do not mention the principal (``TOKEN_POLICIES``:
without a principal cedarling evaluates partially and reports every principal-constrained
policy as a residual, which would make its decisions incomparable).

Rows (all times in microseconds per call, wall clock; ``cedarling/polang`` above 1 means
polang is faster):

- ``start-up``: building the engine from the directory store in a fresh process (imports
  done before the clock starts), median of ``--startups`` processes per engine.
- ``authorize_unsigned``: a fixed mix of 8 requests with a principal, cycled; the two engines
  are interleaved call by call, alternating which goes first, so machine load hits both.
- ``authorize_multi_issuer``, 3 tokens, signature validation off: the same three tokens on
  every call (both engines cache validated tokens) and, as a second row, a fresh set of
  three tokens on every call (no cache hits).
- ``authorize_multi_issuer``, 3 tokens, signature validation on: polang against two real
  OpenID providers on loopback HTTPS (discovery and JWKS fetched once, then cached). No
  cedarling row: see "Why no cedarling row with signatures on" below.

Every decision and set of determining policies is compared between the engines; the run
ends with the number of disagreements (exit status 1 if any).

Why no cedarling row with signatures on: cedarling fetches every trusted issuer's discovery
document at start-up and could not reach a provider on this machine. Over HTTPS, with the
test CA in ``SSL_CERT_FILE`` (it has no ``ssl_context``-like option), start-up failed with
"error sending request" after 4 retries; over plain HTTP an issuer at ``127.0.0.1`` was never
even connected to, and at ``localhost`` the request was sent and answered with a valid
document yet reported the same way. ``CEDARLING_LOCAL_JWKS`` (``{"<issuer id>": [JWK,
...]}``) is read but does not replace discovery for the store's issuers. So signature
validation is off for both engines in the side-by-side rows, and polang's signed rows stand
alone.

Why the signed rows are not comparable with the unsigned ones: every polang row with signatures
off is interleaved call by call with cedarling, and cedarling's calls (its own memory traffic,
and three ``tokio-rt-worker`` threads on a 2-core machine) slow the polang call that follows:
with the same tokens, polang alone takes 91 us per call with signatures on and 91 us with them
off (both hit the validated-token cache, so the work is the same), and 162-166 us for either
when a cedarling call runs between polang calls. The signed rows run alone, which is why "sig
on, same tokens" reads faster than "sig off, same tokens".

Measured on 2026-11-22: 2 cores (Intel Xeon @ 2.50GHz) shared with other sessions, load
average 0.7-2, Python 3.11.7, cedarling-python 2.5.20, ``--requests 2000 --startups 5``
(medians / p99 in microseconds). "before" is the measurement at c5f5b6c that issue #5's
second round started from (medians only), "after" two runs at 41d27a4::

    row                                               polang          cedarling       ced/pol
    start-up, directory store (fresh process)
        before                                       62406           15208          0.24x
        after                                        30433 / 30724    9869 / 12297   0.32x
                                                     31308 / 32297   10506 / 11023   0.34x
    authorize_unsigned (8-request mix)
        before                                          92.8            78.0        0.84x
        after                                           67.5 / 174      72.2 / 104   1.07x
                                                        68.3 / 180      72.9 / 107   1.07x
    multi_issuer, 3 tokens, sig off, same tokens
        before                                         204.0           309.9        1.52x
        after                                          159.9 / 267     294.9 / 352   1.84x
                                                       165.9 / 302     303.9 / 498   1.83x
    multi_issuer, 3 tokens, sig off, fresh tokens
        before                                         423.0           400.7        0.95x
        after                                          351.6 / 897     390.9 / 567   1.11x
                                                       357.7 / 911     397.5 / 587   1.11x
    multi_issuer, 3 tokens, sig on, same tokens
        before                                         123             -
        after                                           91.6 / 187     -
    multi_issuer, 3 tokens, sig on, fresh tokens
        after                                          898 / 1594      -

Decisions and reasons were identical in both engines on every call. Against the targets of
``design.md``: ``authorize_unsigned`` is 1.07x cedarling (target: at least 1x, met);
``authorize_multi_issuer`` with 3 tokens is 1.8x faster than cedarling with tokens seen before
and 1.1x with fresh tokens (target: at least 1x, met); start-up is 3x slower than cedarling's,
whose own start-up measured 10-15 ms across runs (target: within 2x, not met).

Later, after the decision backend's third round (``cond`` functions built on first traced
use, shorter generated code, and the policies' code generated on a background thread once
``Engine(...)`` has loaded everything else), two runs with ``--startups 9`` gave start-up
19.9 ms against cedarling's 14.0 ms (0.70x) and 36.2 against 15.7 ms (0.44x) on a noisy
host, and three start-up-only runs 0.56x, 0.52x and 0.74x: within 2x in four of five runs.
The other rows stayed at or above 1x (``benchmarks/README.md`` has the table).

Where the time went at 41d27a4 (``time.perf_counter`` around each step of ``Engine(...)``
in a fresh process, imports done; about 30 ms in all):

- start-up, the decision backend (``polang.datalog``): about 18.5 ms. Building the compiled
  backend (``CompiledBackend.__init__``) 13-14 ms, of which ``compile()`` of the generated
  policy code 7.3 ms in 20 calls (both the ``run`` and the ``cond`` function of every policy
  are generated and compiled; untraced decisions call ``cond`` only when no ``run`` could be
  generated); lowering 3.5 ms (loading the fixed rules of ``polang.rules`` included);
  ``EntityFacts`` (a networkx graph and condensation for the action entities) 1.3 ms.
- start-up, the rest: about 12 ms. Stored LALR tables for both grammars 2.4 ms (instead of
  building lark's parsers, 16 ms), parsing the schema 2.2 ms, the nine policies 3.9 ms, strict
  policy validation 2.2 ms, reading the directory 0.9 ms.
- ``authorize_unsigned`` (about 53 us per call when run alone; shares from cProfile): the
  compiled decision and the request's facts overlay about 45%; parsing the principal and the
  resource (``cedar_entity_mapping`` dicts) about 20%; building the result with its UUIDv7
  request id about 15%; the context about 6%; request validation (now answered from
  per-schema tables) about 4%.
- ``authorize_multi_issuer``, fresh tokens (about 290 us alone): token processing about 70%
  (building the token entities, with a ``Set<String>`` tag per claim, 27%; the unverified JWT
  decode, base64url and JSON, 13%; the validated-token cache's key and bookkeeping 10%), the
  decision about 16%.
- ``import polang``: 285 ms with bytecode (was 417 ms), 452 ms without (was 595 ms); networkx
  (imported by ``polang.datalog.facts``) is 133 ms of it. PyJWT/cryptography, httpx, PyYAML and
  the query and explanation modules now load on first use.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from polang import Engine, TokenInput

# ---------------------------------------------------------------- the store (one definition)

STORE_ID = "b3c4a11e"  # cedarling wants a hexadecimal id; polang accepts any

TOKEN_SHAPE = """{
        "token_type"?: String,
        "jti"?: String,
        "iss"?: TrustedIssuer,
        "exp"?: Long,
        "validated_at"?: Long,
    } tags Set<String>"""

SCHEMA = f"""namespace Bench {{
    type Url = {{ "host": String, "path": String, "protocol": String }};
    entity TrustedIssuer = {{ "issuer_entity_id": Url }};
    entity Access_token = {TOKEN_SHAPE};
    entity Id_token = {TOKEN_SHAPE};
    type TokensContext = {{
        "total_token_count": Long,
        "bench_access_token"?: Access_token,
        "bench_id_token"?: Id_token,
        "partner_access_token"?: Partner::Access_token,
    }};
    entity User = {{ "name": String, "level": Long, "dept": String }};
    entity Item = {{ "owner": String, "price": Long, "dept": String }};
    action "view", "buy", "audit" appliesTo {{
        principal: [User],
        resource: [Item],
        context: {{ "quantity"?: Long, "tokens"?: TokensContext }},
    }};
}}
namespace Partner {{
    type Url = {{ "host": String, "path": String, "protocol": String }};
    entity TrustedIssuer = {{ "issuer_entity_id": Url }};
    entity Access_token = {TOKEN_SHAPE};
}}
"""

SHARED_POLICIES = """@id("free-items")
permit (principal, action == Bench::Action::"view", resource is Bench::Item)
when { resource.price == 0 };

@id("no-bulk-buys")
forbid (principal, action == Bench::Action::"buy", resource)
when { context has quantity && context.quantity > 10 };
"""

PRINCIPAL_POLICIES = """
@id("owners-view")
permit (principal is Bench::User, action == Bench::Action::"view", resource is Bench::Item)
when { resource.owner == principal.name };

@id("alice-buys")
permit (principal == Bench::User::"alice", action == Bench::Action::"buy", resource);

@id("senior-auditors")
permit (principal is Bench::User, action == Bench::Action::"audit", resource is Bench::Item)
when { principal.level >= 5 && principal.dept == resource.dept };

@id("secret-dept")
forbid (principal is Bench::User, action, resource is Bench::Item)
when { resource.dept == "secret" }
unless { principal.level >= 9 };
"""

TOKEN_ONLY_POLICIES = """
@id("token-buyers")
permit (principal, action == Bench::Action::"buy", resource)
when {
    context has tokens.bench_access_token &&
    context.tokens.bench_access_token.hasTag("scope") &&
    context.tokens.bench_access_token.getTag("scope").contains("buy")
};

@id("partner-viewers-with-mfa")
permit (principal, action == Bench::Action::"view", resource is Bench::Item)
when {
    context has tokens.partner_access_token &&
    context.tokens.partner_access_token.hasTag("role") &&
    context.tokens.partner_access_token.getTag("role").contains("viewer") &&
    context has tokens.bench_id_token &&
    context.tokens.bench_id_token.hasTag("amr") &&
    context.tokens.bench_id_token.getTag("amr").contains("mfa")
};

@id("secret-needs-mfa-token")
forbid (principal, action, resource is Bench::Item)
when { resource.dept == "secret" && context has tokens }
unless {
    context has tokens.bench_id_token &&
    context.tokens.bench_id_token.hasTag("amr") &&
    context.tokens.bench_id_token.getTag("amr").contains("mfa")
};
"""

# The store for unsigned requests and start-up: all nine policies.
POLICIES = SHARED_POLICIES + PRINCIPAL_POLICIES + TOKEN_ONLY_POLICIES
# Multi-issuer requests have no principal. cedarling then evaluates partially and reports
# every policy that constrains `principal` as a residual (in its reasons and errors, and
# the decision is deny), so the multi-issuer store of both engines holds only the five
# policies that do not mention the principal.
TOKEN_POLICIES = SHARED_POLICIES + TOKEN_ONLY_POLICIES

ACCESS, ID, PARTNER = "Bench::Access_token", "Bench::Id_token", "Partner::Access_token"


def issuers(bench_url: str, partner_url: str) -> dict[str, dict[str, Any]]:
    return {
        "bench": {
            "name": "Bench",
            "description": "the service's own provider",
            "openid_configuration_endpoint": f"{bench_url}/.well-known/openid-configuration",
            "token_metadata": {
                "access_token": {"entity_type_name": ACCESS},
                "id_token": {"entity_type_name": ID},
            },
        },
        "partner": {
            "name": "Partner",
            "description": "a partner's provider",
            "openid_configuration_endpoint": f"{partner_url}/.well-known/openid-configuration",
            "token_metadata": {"access_token": {"entity_type_name": PARTNER}},
        },
    }


def _metadata(version_key: str) -> str:
    return json.dumps(
        {
            version_key: "4.4.0",
            "policy_store": {
                "id": STORE_ID,
                "name": "Bench",
                "description": "bench_engine.py",
                "version": "1.0.0",
                "created_date": "2025-01-01T00:00:00Z",
                "updated_date": "2025-01-01T00:00:00Z",
            },
        }
    )


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def write_polang_store(root: Path, iss: dict[str, dict[str, Any]], policies: str) -> Path:
    return _write(
        root,
        {
            "metadata.json": _metadata("polang_version"),
            "schema.polangschema": SCHEMA,
            "policies/bench.polang": policies,
            "trusted-issuers/issuers.json": json.dumps(iss, indent=2),
        },
    )


def write_cedarling_store(root: Path, iss: dict[str, dict[str, Any]], policies: str) -> Path:
    files = {
        "metadata.json": _metadata("cedar_version"),
        "schema.cedarschema": SCHEMA,
        "policies/bench.cedar": policies,
    }
    for issuer_id, record in iss.items():  # cedarling: one issuer per file, id = file stem
        files[f"trusted-issuers/{issuer_id}.json"] = json.dumps(record, indent=2)
    return _write(root, files)


# ---------------------------------------------------------------- loopback OpenID providers


class Provider:
    """Discovery and JWKS over HTTPS on 127.0.0.1, one ES256 key (fast to sign)."""

    def __init__(self, name: str, tls: ssl.SSLContext) -> None:
        self.name = name
        self.key = ec.generate_private_key(ec.SECP256R1())
        jwk = json.loads(ECAlgorithm.to_jwk(self.key.public_key()))
        jwk.update({"kid": f"{name}-1", "alg": "ES256", "use": "sig"})
        self.jwk = jwk
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body: dict[str, Any]
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": provider.issuer, "jwks_uri": f"{provider.issuer}/jwks"}
                elif self.path == "/jwks":
                    body = {"keys": [provider.jwk]}
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
        # at the root: cedarling (signatures off) matches issuers with a path to none
        return f"https://localhost:{self.port}"

    def token(self, **claims: Any) -> str:
        now = int(time.time())
        body = {
            "iss": self.issuer,
            "sub": "user-1",
            "aud": "bench",
            "jti": uuid.uuid4().hex,
            "iat": now,
            "exp": now + 3600,
            **claims,
        }
        return jwt.encode(body, self.key, algorithm="ES256", headers={"kid": f"{self.name}-1"})

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def providers() -> Iterator[tuple[Provider, Provider, ssl.SSLContext]]:
    import trustme  # a test dependency of polang

    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    bench, partner = Provider("bench", server), Provider("partner", server)
    try:
        yield bench, partner, client
    finally:
        bench.stop()
        partner.stop()


def token_set(bench: Provider, partner: Provider, i: int) -> list[tuple[str, str]]:
    """Three tokens (mapping, jwt); the claims vary with ``i`` so decisions vary."""
    return [
        (ACCESS, bench.token(scope=["buy", "read"] if i % 2 == 0 else ["read"])),
        (ID, bench.token(amr=["pwd", "mfa"] if i % 3 else ["pwd"])),
        (PARTNER, partner.token(role=["viewer"] if i % 4 else ["guest"])),
    ]


# ---------------------------------------------------------------- requests


def item(uid: str, owner: str, price: int, dept: str) -> dict[str, Any]:
    return {
        "cedar_entity_mapping": {"entity_type": "Bench::Item", "id": uid},
        "owner": owner,
        "price": price,
        "dept": dept,
    }


def user(name: str, level: int, dept: str) -> dict[str, Any]:
    return {
        "cedar_entity_mapping": {"entity_type": "Bench::User", "id": name},
        "name": name,
        "level": level,
        "dept": dept,
    }


VIEW, BUY, AUDIT = ('Bench::Action::"view"', 'Bench::Action::"buy"', 'Bench::Action::"audit"')

UNSIGNED: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    (VIEW, item("cup", "bob", 0, "sales"), {}, user("alice", 1, "sales")),
    (VIEW, item("pen", "alice", 5, "sales"), {}, user("alice", 1, "sales")),
    (VIEW, item("pen", "bob", 5, "sales"), {}, user("alice", 1, "sales")),
    (BUY, item("pen", "bob", 5, "sales"), {"quantity": 20}, user("alice", 1, "sales")),
    (BUY, item("pen", "bob", 5, "sales"), {"quantity": 2}, user("alice", 1, "sales")),
    (BUY, item("pen", "bob", 5, "sales"), {}, user("bob", 1, "sales")),
    (AUDIT, item("ledger", "bob", 5, "finance"), {}, user("carol", 7, "finance")),
    (AUDIT, item("plans", "bob", 0, "secret"), {}, user("carol", 7, "secret")),
]

MULTI: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (BUY, item("pen", "bob", 5, "sales"), {}),
    (BUY, item("pen", "bob", 5, "sales"), {"quantity": 50}),
    (VIEW, item("pen", "bob", 5, "sales"), {}),
    (VIEW, item("plans", "bob", 5, "secret"), {}),
]

Outcome = tuple[bool, frozenset[str]]


# ---------------------------------------------------------------- the engines


def polang_engine(store: Path, sig: bool, ctx: ssl.SSLContext | None = None) -> Engine:
    cfg = {
        "ENGINE_POLICY_STORE_LOCAL_FN": str(store),
        "ENGINE_JWT_SIG_VALIDATION": "enabled" if sig else "disabled",
        "ENGINE_JWT_STATUS_VALIDATION": "disabled",
        "ENGINE_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": ["ES256"],
        "ENGINE_LOG_TYPE": "off",
        "ENGINE_HTTP_MAX_RETRIES": 0,
    }
    return Engine(cfg, ssl_context=ctx)


def cedarling_config(store: Path) -> dict[str, Any]:
    return {
        "CEDARLING_APPLICATION_NAME": "bench",
        "CEDARLING_POLICY_STORE_LOCAL_FN": str(store),
        "CEDARLING_JWT_SIG_VALIDATION": "disabled",
        "CEDARLING_JWT_STATUS_VALIDATION": "disabled",
        "CEDARLING_JWT_SIGNATURE_ALGORITHMS_SUPPORTED": ["ES256"],
        "CEDARLING_LOG_TYPE": "off",
    }


class Cedarling:
    """The cedarling-python side, with requests converted once (not timed)."""

    def __init__(self, store: Path) -> None:
        import cedarling_python as cp

        self.cp = cp
        self.engine = cp.Cedarling(cp.BootstrapConfig(cedarling_config(store)))

    def unsigned(self, r: tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]) -> Any:
        cp = self.cp
        action, resource, context, principal = r
        return cp.RequestUnsigned(
            action, cp.EntityData.from_dict(resource), context, cp.EntityData.from_dict(principal)
        )

    def multi(
        self,
        tokens: list[tuple[str, str]],
        action: str,
        resource: dict[str, Any],
        context: dict[str, Any],
    ) -> Any:
        cp = self.cp
        return cp.AuthorizeMultiIssuerRequest(
            tokens=[cp.TokenInput(m, p) for m, p in tokens],
            action=action,
            resource=cp.EntityData.from_dict(resource),
            context=context,
        )

    def run_unsigned(self, req: Any) -> Outcome:
        r = self.engine.authorize_unsigned(req)
        return r.is_allowed(), frozenset(r.response.diagnostics.reason)

    def run_multi(self, req: Any) -> Outcome:
        r = self.engine.authorize_multi_issuer(req)
        return r.is_allowed(), frozenset(r.response().diagnostics.reason)


def polang_outcome(r: Any) -> Outcome:
    return r.decision, frozenset(r.response.diagnostics.reason)


# ---------------------------------------------------------------- timing


@dataclass
class Row:
    name: str
    polang: list[float] = field(default_factory=list)
    cedarling: list[float] = field(default_factory=list)
    allowed: int = 0  # timed polang calls that allowed (the mix must not be one-sided)
    note: str = ""

    @staticmethod
    def stats(xs: list[float]) -> tuple[float, float]:
        if not xs:
            return math.nan, math.nan
        s = sorted(xs)
        return statistics.median(s) * 1e6, s[max(0, math.ceil(0.99 * len(s)) - 1)] * 1e6

    def to_dict(self) -> dict[str, Any]:
        pm, pp = self.stats(self.polang)
        cm, cp = self.stats(self.cedarling)
        return {
            "row": self.name,
            "polang_median_us": round(pm, 1),
            "polang_p99_us": round(pp, 1),
            "cedarling_median_us": None if math.isnan(cm) else round(cm, 1),
            "cedarling_p99_us": None if math.isnan(cp) else round(cp, 1),
            "cedarling_over_polang": None if math.isnan(cm) else round(cm / pm, 2),
            "samples": len(self.polang),
            "allowed": self.allowed,
            "note": self.note,
        }


def interleave(
    n: int,
    warmup: int,
    polang_call: Callable[[int], Outcome],
    cedarling_call: Callable[[int], Outcome] | None,
    row: Row,
    mismatches: list[str],
) -> None:
    """Call both engines on request ``k`` (alternating who goes first); time each call.

    ``k`` runs from 0 to ``warmup + n - 1``; the first ``warmup`` calls are not timed.
    """
    clock = time.perf_counter
    for i in range(-warmup, n):
        k = i + warmup
        first_polang = i % 2 == 0
        order = ("p", "c") if first_polang else ("c", "p")
        outs: dict[str, Outcome] = {}
        for who in order:
            if who == "p":
                t0 = clock()
                outs["p"] = polang_call(k)
                dt = clock() - t0
                if i >= 0:
                    row.polang.append(dt)
                    row.allowed += outs["p"][0]
            elif cedarling_call is not None:
                t0 = clock()
                outs["c"] = cedarling_call(k)
                dt = clock() - t0
                if i >= 0:
                    row.cedarling.append(dt)
        if "c" in outs and outs["c"] != outs["p"] and len(mismatches) < 50:
            mismatches.append(f"{row.name} #{k}: polang {outs['p']} cedarling {outs['c']}")


STARTUP_SNIPPET = {
    "polang": (
        "import sys, time\n"
        "from polang import Engine\n"
        # the modules polang loads on first use, loaded here: the row excludes imports
        # (whole processes, imports included, are bench_coldstart.py's)
        "import polang.store.source, polang.language.parser, polang.language.schema\n"
        "import polang.language.validate, polang.tokens.processor, polang.datalog.lower\n"
        "t = time.perf_counter()\n"
        "e = Engine({'ENGINE_POLICY_STORE_LOCAL_FN': sys.argv[1],"
        " 'ENGINE_JWT_SIG_VALIDATION': 'disabled', 'ENGINE_JWT_STATUS_VALIDATION': 'disabled'})\n"
        "print(time.perf_counter() - t)\n"
    ),
    "cedarling": (
        "import json, sys, time\n"
        "import cedarling_python as cp\n"
        "cfg = cp.BootstrapConfig(json.loads(sys.argv[2]))\n"
        "t = time.perf_counter()\n"
        "e = cp.Cedarling(cfg)\n"
        "print(time.perf_counter() - t)\n"
    ),
}


def startup_row(polang_store: Path, cedarling_store: Path, runs: int, have_cedarling: bool) -> Row:
    row = Row("start-up, directory store (fresh process)")
    for i in range(runs):
        engines = ["polang", "cedarling"] if i % 2 == 0 else ["cedarling", "polang"]
        for name in engines:
            if name == "cedarling" and not have_cedarling:
                continue
            store = polang_store if name == "polang" else cedarling_store
            out = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    STARTUP_SNIPPET[name],
                    str(store),
                    json.dumps(cedarling_config(cedarling_store)),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            (row.polang if name == "polang" else row.cedarling).append(float(out.stdout))
    row.note = "imports excluded; store load, checks and compile"
    return row


# ---------------------------------------------------------------- the run


def run(n: int, startups: int) -> tuple[list[Row], list[str], str]:
    try:
        import cedarling_python  # noqa: F401

        have_cedarling = True
        cedarling_note = ""
    except ImportError as e:
        have_cedarling = False
        cedarling_note = f"cedarling-python not importable ({e}): polang alone"
    rows: list[Row] = []
    mismatches: list[str] = []
    warmup = min(50, n)
    with providers() as (bench, partner, client_ctx), tempfile.TemporaryDirectory() as tmp:
        iss = issuers(bench.issuer, partner.issuer)
        pstore = write_polang_store(Path(tmp) / "polang", iss, POLICIES)
        cstore = write_cedarling_store(Path(tmp) / "cedarling", iss, POLICIES)
        ptok = write_polang_store(Path(tmp) / "polang-tokens", iss, TOKEN_POLICIES)
        ctok = write_cedarling_store(Path(tmp) / "cedarling-tokens", iss, TOKEN_POLICIES)

        rows.append(startup_row(pstore, cstore, startups, have_cedarling))

        p_off = polang_engine(pstore, sig=False)
        c = Cedarling(cstore) if have_cedarling else None
        pt_off = polang_engine(ptok, sig=False)
        ct = Cedarling(ctok) if have_cedarling else None

        # authorize_unsigned
        row = Row("authorize_unsigned (8-request mix)")
        c_unsigned = [c.unsigned(r) for r in UNSIGNED] if c else []
        interleave(
            n,
            warmup,
            lambda k: polang_outcome(p_off.authorize_unsigned(*UNSIGNED[k % 8])),
            (lambda k: c.run_unsigned(c_unsigned[k % 8])) if c else None,
            row,
            mismatches,
        )
        row.note = "principal and resource as cedar_entity_mapping dicts"
        rows.append(row)
        p_off.close()

        # authorize_multi_issuer, signatures off, same tokens every call
        same = token_set(bench, partner, 0)
        same_inputs = [TokenInput(m, p) for m, p in same]
        row = Row("authorize_multi_issuer, 3 tokens, sig off, same tokens")
        c_same = [ct.multi(same, a, r, ctx) for a, r, ctx in MULTI] if ct else []
        interleave(
            n,
            warmup,
            lambda k: polang_outcome(
                pt_off.authorize_multi_issuer(same_inputs, *MULTI[k % len(MULTI)])
            ),
            (lambda k: ct.run_multi(c_same[k % len(MULTI)])) if ct else None,
            row,
            mismatches,
        )
        row.note = "validated-token caches hit"
        rows.append(row)

        # authorize_multi_issuer, signatures off, fresh tokens every call
        fresh_n = max(1, n // 2)
        sets = [token_set(bench, partner, i) for i in range(fresh_n + warmup)]
        p_sets = [[TokenInput(m, p) for m, p in s] for s in sets]
        c_fresh = [ct.multi(s, *MULTI[i % len(MULTI)]) for i, s in enumerate(sets)] if ct else []
        row = Row("authorize_multi_issuer, 3 tokens, sig off, fresh tokens")
        interleave(
            fresh_n,
            warmup,
            lambda k: polang_outcome(pt_off.authorize_multi_issuer(p_sets[k], *MULTI[k % 4])),
            (lambda k: ct.run_multi(c_fresh[k])) if ct else None,
            row,
            mismatches,
        )
        row.note = "a new set of 3 tokens per call"
        rows.append(row)
        pt_off.close()

        # authorize_multi_issuer, signatures on: polang only (see the module docstring)
        p_on = polang_engine(ptok, sig=True, ctx=client_ctx)
        on_same = Row("authorize_multi_issuer, 3 tokens, sig on, same tokens")
        interleave(
            n,
            warmup,
            lambda k: polang_outcome(p_on.authorize_multi_issuer(same_inputs, *MULTI[k % 4])),
            None,
            on_same,
            mismatches,
        )
        on_same.note = "polang only: cedarling cannot reach a loopback provider"
        rows.append(on_same)
        signed_sets = [token_set(bench, partner, i + 7) for i in range(fresh_n + warmup)]
        signed_inputs = [[TokenInput(m, p) for m, p in s] for s in signed_sets]
        on_fresh = Row("authorize_multi_issuer, 3 tokens, sig on, fresh tokens")
        interleave(
            fresh_n,
            warmup,
            lambda k: polang_outcome(p_on.authorize_multi_issuer(signed_inputs[k], *MULTI[k % 4])),
            None,
            on_fresh,
            mismatches,
        )
        on_fresh.note = "polang only: 3 ES256 signatures verified per call"
        rows.append(on_fresh)
        # signatures on or off must not change a decision
        with polang_engine(ptok, sig=False) as ref:
            for k, s in enumerate(signed_inputs):
                want = polang_outcome(ref.authorize_multi_issuer(s, *MULTI[k % 4]))
                got = polang_outcome(p_on.authorize_multi_issuer(s, *MULTI[k % 4]))
                if want != got:
                    mismatches.append(f"sig on vs off #{k}: {got} != {want}")
        p_on.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows, mismatches, cedarling_note


def print_table(rows: list[Row], mismatches: list[str], note: str) -> None:
    head = (
        f"{'row':58} {'polang med':>10} {'p99':>9} {'cedarling med':>13} {'p99':>9}"
        f" {'ced/pol':>8}  {'n':>5} {'allow':>5}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        d = r.to_dict()

        def f(x: float | None) -> str:
            return "-" if x is None else f"{x:.1f}"

        ratio = "-" if d["cedarling_over_polang"] is None else f"{d['cedarling_over_polang']}x"
        print(
            f"{r.name:58} {f(d['polang_median_us']):>10} {f(d['polang_p99_us']):>9}"
            f" {f(d['cedarling_median_us']):>13} {f(d['cedarling_p99_us']):>9} {ratio:>8}"
            f"  {d['samples']:>5} {d['allowed'] if r.allowed or 'start' not in r.name else '':>5}"
        )
    print("\ntimes in microseconds; ced/pol > 1 means polang is faster")
    if note:
        print(note)
    if mismatches:
        print(f"\n{len(mismatches)} decision disagreements:")
        for m in mismatches[:20]:
            print("  " + m)
    else:
        print("decisions and reasons: identical in both engines")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000, help="timed calls per row")
    ap.add_argument("--startups", type=int, default=5, help="fresh processes per engine")
    ap.add_argument("--json", action="store_true", help="also print one line of JSON")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    rows, mismatches, note = run(args.requests, args.startups)
    print_table(rows, mismatches, note)
    if args.json:
        print(json.dumps({"rows": [r.to_dict() for r in rows], "mismatches": len(mismatches)}))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
