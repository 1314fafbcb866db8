"""The SQL queries against the in-process ones on conformance corpus files.

For each file: its schema, policies and entities; for each distinct request context (at
most two per file), the whole access matrix over every action, and ``who_can`` /
``what_can`` for the file's requests whose resource / principal the store holds. Entries
are compared row for row: (principal, action, resource), decision and reasons; the matrix
also without reasons (another path on DuckDB), in order.

Run as a script for the whole corpus and a count of fallbacks by reason::

    python tests/sql/corpus_check.py [PACK] [--every N] [--no-udf]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polang.analysis.query import access_matrix, what_can, who_can
from polang.datalog.authorizer import Authorizer
from polang.datalog.facts import EntityFacts
from polang.errors import PolangError
from polang.language.entities import parse_context, parse_entities, parse_entity_uid_json
from polang.language.parser import parse_policies
from polang.language.schema import parse_schema
from polang.language.values import RecordValue


@dataclass
class Outcome:
    file: str
    queries: int = 0
    mismatches: list[str] = field(default_factory=list)
    fallbacks: Counter[str] = field(default_factory=Counter)
    skipped: str | None = None


def _key_in(e: Any) -> tuple[Any, ...]:
    return (e.principal, e.action, e.resource)


def _compare(kind: str, want: Any, got: Any, out: Outcome) -> None:
    w = {_key_in(e): (e.decision, tuple(e.reasons)) for e in want.iter_entries()}
    g = {_key_in(e): (e.decision, e.reasons) for e in got.entries}
    if not got.complete:
        # policies reported as conditional: a surely allowed row must be allowed in
        # process, and every row allowed in process must be allowed or conditional here
        wrong = [k for k, (d, _r) in g.items() if d == "allow" and w.get(k, ("",))[0] != "allow"]
        lost = [k for k in w if k not in g]
        if wrong or lost:
            out.mismatches.append(
                f"{kind} (conditional): wrongly allowed {wrong[:3]} lost {lost[:3]}"
            )
        return
    if w != g:
        missing = sorted(set(w) - set(g))[:3]
        extra = sorted(set(g) - set(w))[:3]
        diff = sorted(k for k in set(w) & set(g) if w[k] != g[k])[:3]
        out.mismatches.append(
            f"{kind}: missing {missing} extra {extra} different {[(k, w[k], g[k]) for k in diff]}"
        )
    # the rows come in the in-process order
    order_w = [_key_in(e) for e in want.iter_entries()]
    order_g = [_key_in(e) for e in got.entries]
    if w == g and order_w != order_g:
        out.mismatches.append(f"{kind}: same rows in another order")


def check_file(root: Path, path: Path, *, udf: bool = True, max_contexts: int = 2) -> Outcome:
    from polang.sql.duck import DuckDBEngine
    from polang.sql.engine import SqlFallback

    out = Outcome(str(path.relative_to(root)))
    spec = json.loads(path.read_text("utf-8"))
    try:
        schema = parse_schema((root / spec["schema"]).read_text("utf-8"))
        policies = parse_policies((root / spec["policies"]).read_text("utf-8"))
        store = parse_entities((root / spec["entities"]).read_text("utf-8"), schema)
        auth = Authorizer({f"policy{i}": p for i, p in enumerate(policies)})
    except PolangError as e:
        out.skipped = f"does not load: {type(e).__name__}"
        return out
    facts = EntityFacts(store)
    contexts: dict[str, RecordValue] = {}
    reqs = []
    for i, req in enumerate(spec.get("requests", [])):
        try:
            p = parse_entity_uid_json(req["principal"])
            a = parse_entity_uid_json(req["action"])
            r = parse_entity_uid_json(req["resource"])
            ctx = parse_context(req.get("context", {}), schema, a, path=f"$.requests[{i}]")
        except PolangError:
            continue
        contexts.setdefault(repr(ctx), ctx)
        reqs.append((p, a, r, ctx))
    if not contexts:
        contexts[repr(RecordValue())] = RecordValue()
    eng = DuckDBEngine(auth.program, facts, schema, udf=udf)
    try:
        for ctx in list(contexts.values())[:max_contexts]:
            want = access_matrix(auth, facts, ctx, schema=schema)
            got = eng.access_matrix(ctx, reasons=True)
            out.queries += 1
            for f in got.fallbacks:
                out.fallbacks[f"{f.how}: {f.reason}"] += 1
            _compare("matrix", want, got, out)
            # without reasons DuckDB orders and deduplicates the pairs itself (NumPy)
            bare = eng.access_matrix(ctx)
            out.queries += 1
            if bare.complete and [(_key_in(e), e.decision) for e in bare.entries] != [
                (_key_in(e), e.decision) for e in want.iter_entries()
            ]:
                out.mismatches.append("matrix without reasons: other rows or order")
        for p, a, r, ctx in reqs[:4]:
            if facts.get(r) is not None:
                out.queries += 1
                _compare(
                    f"who_can({a}, {r})",
                    who_can(auth, facts, a, r, ctx, schema=schema),
                    eng.who_can(a, r, ctx, reasons=True),
                    out,
                )
            if facts.get(p) is not None:
                out.queries += 1
                try:
                    got_w = eng.what_can(p, None, ctx, reasons=True)
                except SqlFallback:
                    continue
                _compare(
                    f"what_can({p})", what_can(auth, facts, p, None, ctx, schema=schema), got_w, out
                )
    finally:
        eng.close()
    return out


def main(argv: list[str]) -> int:
    import argparse
    import tarfile
    import tempfile

    from polang.conformance import test_files

    ap = argparse.ArgumentParser()
    ap.add_argument(
        "pack",
        nargs="?",
        default=str(
            Path(__file__).resolve().parents[3] / "shared/conformance/polang-corpus.tar.gz"
        ),
    )
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--no-udf", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(args.pack) as tf:
            tf.extractall(tmp, filter="data")
        root = Path(tmp)
        files = list(test_files(root))[:: args.every]
        totals: Counter[str] = Counter()
        reasons: Counter[str] = Counter()
        bad = []
        for n, f in enumerate(files, 1):
            o = check_file(root, f, udf=not args.no_udf)
            if o.skipped:
                totals["skipped"] += 1
                continue
            totals["files"] += 1
            totals["queries"] += o.queries
            if o.fallbacks:
                totals["files with fallbacks"] += 1
                for k in o.fallbacks:
                    reasons[k] += 1
            else:
                totals["files fully in SQL"] += 1
            if o.mismatches:
                totals["files with mismatches"] += 1
                bad.append(o)
            if n % 200 == 0:
                print(f"{n}/{len(files)} {dict(totals)}", file=sys.stderr)
        print(
            json.dumps(
                {"totals": dict(totals), "fallback files by reason": reasons.most_common()},
                indent=1,
            )
        )
        for o in bad[:20]:
            print(o.file, o.mismatches[:2])
        return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
