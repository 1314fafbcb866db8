"""List views: one principal (or one token set), one action, many resources, as one batch.

Usage::

    python benchmarks/bench_batch.py [--rounds N] [--size N] [--json]

The store is ``bench_engine.py``'s (one schema, nine policies, two issuers; the
multi-issuer rows use its five token policies), written once under polang's names and once
under Cedar's. A sample is one list view of ``--size`` (50) resources, each given in full
(``cedar_entity_mapping`` dicts, as a service sends them), decided four ways:

- ``polang, single calls``: ``authorize_unsigned`` once per resource;
- ``polang batch``: one ``authorize_unsigned_batch(requests, principal=...)``;
- ``cedarling, single calls``: ``Cedarling.authorize_unsigned`` once per resource;
- ``cedarling batch``: one ``Cedarling.authorize_unsigned_batch`` (``BatchAuthorizeUnsignedRequest``
  with one principal and a ``BatchItem`` per resource).

Every cedarling call includes building its request objects from the same dicts
(``EntityData.from_dict``, ``BatchItem``...), since polang's calls parse the dicts too; a
separate row gives cedarling's batch with the request objects built beforehand. The
multi-issuer rows do the same with three tokens (signature validation off in both engines,
tokens seen before) and ``authorize_multi_issuer_batch(requests, tokens=...)``.

The four variants of a row run in turn within a round, the order rotating every round, so
machine load hits all alike. Times are per list view (all ``--size`` resources), medians
over the rounds, in microseconds. ``batch/singles`` is polang's batch over polang's single
calls (the goal of ``design.md``: at most 0.2); ``cedarling batch/polang batch`` above 1
means polang's batch is faster. Decisions and reasons of every resource are compared across
all four; the exit status is 1 on any disagreement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_engine import (
    AUDIT,
    BUY,
    POLICIES,
    TOKEN_POLICIES,
    VIEW,
    Cedarling,
    issuers,
    item,
    polang_engine,
    polang_outcome,
    providers,
    token_set,
    user,
    write_cedarling_store,
    write_polang_store,
)
from polang import AuthorizeResult, TokenInput

Outcome = tuple[bool, frozenset[str]]


def resources(n: int) -> list[dict[str, Any]]:
    """``n`` items with owners, prices and departments varied so decisions vary."""
    owners = ("alice", "bob", "carol")
    depts = ("sales", "sales", "finance", "secret")
    return [item(f"item-{k}", owners[k % 3], (k * 7) % 5, depts[(k // 3) % 4]) for k in range(n)]


def _polang(results: list[Any]) -> list[Outcome]:
    out = []
    for r in results:
        assert isinstance(r, AuthorizeResult), r  # every request of the benchmark is valid
        out.append(polang_outcome(r))
    return out


class Row:
    def __init__(self, name: str, variants: list[str]) -> None:
        self.name = name
        self.times: dict[str, list[float]] = {v: [] for v in variants}

    def median_us(self, variant: str) -> float:
        xs = self.times[variant]
        return statistics.median(xs) * 1e6 if xs else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "row": self.name,
            **{f"{v} median us": round(self.median_us(v), 1) for v in self.times},
        }


def run_row(
    row: Row,
    calls: dict[str, Callable[[], list[Outcome]]],
    rounds: int,
    warmup: int,
    mismatches: list[str],
) -> None:
    names = list(calls)
    clock = time.perf_counter
    for r in range(-warmup, rounds):
        k = r % len(names)
        order = names[k:] + names[:k]
        outs: dict[str, list[Outcome]] = {}
        for name in order:
            t0 = clock()
            outs[name] = calls[name]()
            dt = clock() - t0
            if r >= 0:
                row.times[name].append(dt)
        ref = outs[names[0]]
        for name in names[1:]:
            if outs[name] != ref and len(mismatches) < 20:
                bad = [i for i, (a, b) in enumerate(zip(ref, outs[name], strict=True)) if a != b]
                mismatches.append(f"{row.name}: {name} differs from {names[0]} at {bad[:5]}")


def run(rounds: int, size: int) -> tuple[list[Row], list[str], dict[str, float]]:
    mismatches: list[str] = []
    rows: list[Row] = []
    res = resources(size)
    alice = user("alice", 9, "secret")
    with providers() as (bench, partner, _ctx), tempfile.TemporaryDirectory() as tmp:
        iss = issuers(bench.issuer, partner.issuer)
        pstore = write_polang_store(Path(tmp) / "polang", iss, POLICIES)
        cstore = write_cedarling_store(Path(tmp) / "cedarling", iss, POLICIES)
        ptok = write_polang_store(Path(tmp) / "polang-tokens", iss, TOKEN_POLICIES)
        ctok = write_cedarling_store(Path(tmp) / "cedarling-tokens", iss, TOKEN_POLICIES)
        p = polang_engine(pstore, sig=False)
        pt = polang_engine(ptok, sig=False)
        c = Cedarling(cstore)
        ct = Cedarling(ctok)
        p.authorizer.backend.wait_generated(10)  # type: ignore[attr-defined]
        pt.authorizer.backend.wait_generated(10)  # type: ignore[attr-defined]
        cp = c.cp

        for action in (VIEW, AUDIT):
            requests = [{"action": action, "resource": r} for r in res]
            c_items = [cp.BatchItem(cp.EntityData.from_dict(r), action, {}) for r in res]
            c_prebuilt = cp.BatchAuthorizeUnsignedRequest(c_items, cp.EntityData.from_dict(alice))

            def ced_batch(
                requests: list[dict[str, Any]] = requests, action: str = action
            ) -> list[Outcome]:
                req = cp.BatchAuthorizeUnsignedRequest(
                    [
                        cp.BatchItem(cp.EntityData.from_dict(r["resource"]), action, {})
                        for r in requests
                    ],
                    cp.EntityData.from_dict(alice),
                )
                return [
                    (x.unwrap().is_allowed(), frozenset(x.unwrap().response.diagnostics.reason))
                    for x in c.engine.authorize_unsigned_batch(req).results
                ]

            def ced_prebuilt(req: Any = c_prebuilt) -> list[Outcome]:
                return [
                    (x.unwrap().is_allowed(), frozenset(x.unwrap().response.diagnostics.reason))
                    for x in c.engine.authorize_unsigned_batch(req).results
                ]

            calls: dict[str, Callable[[], list[Outcome]]] = {
                "polang singles": lambda requests=requests: [
                    polang_outcome(p.authorize_unsigned(principal=alice, **r)) for r in requests
                ],
                "polang batch": lambda requests=requests: _polang(
                    p.authorize_unsigned_batch(requests, principal=alice)
                ),
                "cedarling singles": lambda action=action: [
                    c.run_unsigned(c.unsigned((action, r, {}, alice))) for r in res
                ],
                "cedarling batch": ced_batch,
                "cedarling batch, prebuilt": ced_prebuilt,
            }
            row = Row(f"authorize_unsigned, {size} resources, action {action}", list(calls))
            run_row(row, calls, rounds, 3, mismatches)
            rows.append(row)

        tokens = token_set(bench, partner, 0)
        p_tokens = [TokenInput(m, t) for m, t in tokens]
        for action in (BUY, VIEW):
            requests = [{"action": action, "resource": r} for r in res]

            def ced_multi_batch(action: str = action) -> list[Outcome]:
                req = cp.BatchAuthorizeMultiIssuerRequest(
                    [cp.TokenInput(m, t) for m, t in tokens],
                    [cp.BatchItem(cp.EntityData.from_dict(r), action, {}) for r in res],
                )
                return [
                    (
                        x.unwrap().is_allowed(),
                        frozenset(x.unwrap().response().diagnostics.reason),
                    )
                    for x in ct.engine.authorize_multi_issuer_batch(req).results
                ]

            calls = {
                "polang singles": lambda requests=requests: [
                    polang_outcome(pt.authorize_multi_issuer(p_tokens, **r)) for r in requests
                ],
                "polang batch": lambda requests=requests: _polang(
                    pt.authorize_multi_issuer_batch(requests, tokens=p_tokens)
                ),
                "cedarling singles": lambda action=action: [
                    ct.run_multi(ct.multi(tokens, action, r, {})) for r in res
                ],
                "cedarling batch": ced_multi_batch,
            }
            row = Row(f"authorize_multi_issuer, 3 tokens, {size} resources, {action}", list(calls))
            run_row(row, calls, rounds, 3, mismatches)
            rows.append(row)
        p.close()
        pt.close()
    return rows, mismatches, {}


def print_table(rows: list[Row], mismatches: list[str], size: int) -> None:
    for row in rows:
        print(f"\n{row.name}")
        for v in row.times:
            print(
                f"  {v:28} {row.median_us(v):10.0f} us per list view"
                f"  ({row.median_us(v) / size:6.1f} us per resource)"
            )
        pb, ps = row.median_us("polang batch"), row.median_us("polang singles")
        cb = row.median_us("cedarling batch")
        print(f"  polang batch/singles {pb / ps:.3f}   cedarling batch/polang batch {cb / pb:.2f}x")
    if mismatches:
        print(f"\n{len(mismatches)} disagreements:")
        for m in mismatches:
            print("  " + m)
    else:
        print("\ndecisions and reasons: identical across singles and batches of both engines")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100, help="list views timed per variant")
    ap.add_argument("--size", type=int, default=50, help="resources per list view")
    ap.add_argument("--json", action="store_true", help="also print one line of JSON")
    args = ap.parse_args(argv)
    rows, mismatches, _ = run(args.rounds, args.size)
    print_table(rows, mismatches, args.size)
    if args.json:
        print(json.dumps({"rows": [r.to_dict() for r in rows], "mismatches": len(mismatches)}))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
