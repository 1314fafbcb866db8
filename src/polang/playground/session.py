"""What the playground page runs (in the browser, under Pyodide): the editors' text in,
the decision and why out.

:func:`evaluate` builds a store from the four editors (schema, policies, entities,
request), decides the request and explains it: the explanation tree, the repairs (the
smallest changes to the data that flip the decision), who can do the action on the
resource and what the principal can do. Anything wrong is a problem with the editor, line
and column it belongs to, never an exception: the page calls this on every keystroke.
It is the same engine as everywhere, given the texts as a ``.parc`` archive.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from typing import Any

from polang.engine.facade import Engine
from polang.errors import PolangError, ValidationError
from polang.inputs.fields import closest, show
from polang.inputs.problems import PolicyStoreLoadError
from polang.jsonlimits import loads

#: The longest text one editor may hold (characters); a larger one is a problem, not read.
MAX_EDITOR_CHARS = 200_000
#: Principals and (action, resource) pairs listed by who can / what can.
MAX_LISTED = 50

EDITORS = ("schema", "policies", "entities", "request")
REQUEST_KEYS = ("principal", "action", "resource", "context")
_FILES = {
    "schema.polangschema": "schema",
    "policies/policies.polang": "policies",
    "entities/entities.json": "entities",
}
_METADATA = {
    "polang_version": "4.0.0",
    "policy_store": {"id": "playground", "name": "Playground", "version": "0.0.0"},
}
_LINE_COL = re.compile(r"(\d+):(\d+)")
_IN_MESSAGE = re.compile(r"^(?:[^:\n]*):(\d+):(\d+): ")


class _Refused(PolangError):
    """An editor's text that cannot be read (its problem says where)."""


def evaluate(inputs_json: str) -> str:
    """``{"schema", "policies", "entities", "request"}`` (JSON text) -> the answer (JSON
    text): ``problems`` (each with ``editor``, ``line``, ``column``, ``message``), and
    when there are none ``decision``, ``reasons``, ``errors``, ``explanation``,
    ``repairs``, ``who_can``, ``what_can``."""
    try:
        return json.dumps(_evaluate(inputs_json))
    except PolangError as e:  # anything the steps below did not place
        return json.dumps({"problems": [_problem("request", str(e))]})


def _problem(editor: str, message: str, line: int | None = None, col: int | None = None) -> dict:
    if line is None:
        found = _IN_MESSAGE.match(message)
        if found:
            line, col = int(found.group(1)), int(found.group(2))
    return {"editor": editor, "line": line, "column": col, "message": message}


def _evaluate(inputs_json: str) -> dict[str, Any]:
    raw = loads(inputs_json, what="the playground's input", error=_Refused)
    if not isinstance(raw, dict):
        return {"problems": [_problem("request", "the input is not an object")]}
    texts: dict[str, str] = {}
    problems = []
    for editor in EDITORS:
        text = raw.get(editor, "")
        if not isinstance(text, str):
            problems.append(_problem(editor, f"the {editor} editor's text is not a string"))
        elif len(text) > MAX_EDITOR_CHARS:
            problems.append(
                _problem(
                    editor,
                    f"{len(text)} characters, more than MAX_EDITOR_CHARS ({MAX_EDITOR_CHARS})",
                )
            )
        texts[editor] = text if isinstance(text, str) else ""
    if problems:
        return {"problems": problems}
    try:
        request = loads(texts["request"], what="request", error=_Refused)
    except _Refused as e:
        return {"problems": [_problem("request", str(e))]}
    if not isinstance(request, dict):
        return {"problems": [_problem("request", "the request is a JSON object")]}
    unknown = sorted(set(request) - set(REQUEST_KEYS))
    if unknown:
        near = closest(unknown[0], REQUEST_KEYS)
        hint = f" (did you mean {near!r}?)" if near else ""
        message = f"unknown key {show(unknown[0])} in the request{hint}; allowed: "
        return {"problems": [_problem("request", message + ", ".join(REQUEST_KEYS))]}
    try:
        engine = _engine(texts)
    except PolicyStoreLoadError as e:
        return {"problems": [_store_problem(p) for p in e.problems]}
    except ValidationError as e:  # policies that do not fit the schema
        return {"problems": [_finding(f) for f in e.findings] or [_problem("policies", str(e))]}
    # read as the engine reads them: whatever is there, the engine says what is wrong
    principal: Any = request.get("principal")
    action: Any = request.get("action")
    resource: Any = request.get("resource")
    context: Any = request.get("context") or {}
    out: dict[str, Any] = {"problems": []}
    try:
        result = engine.authorize_unsigned(action, resource, context, principal)
        explanation = engine.explain(action, resource, context, principal)
        repairs = explanation.repairs
        who = engine.who_can(action, resource, context)
        what = engine.what_can(principal, None, context)
    except PolangError as e:
        return {"problems": [_problem("request", str(e))]}
    out["decision"] = "allow" if result.decision else "deny"
    out["reasons"] = list(result.response.diagnostics.reason)
    out["errors"] = [dict(e) for e in result.response.diagnostics.errors]
    out["explanation"] = explanation.render()
    out["repairs"] = [r.describe() for r in repairs]
    out["repairs_note"] = repairs.note
    out["who_can"] = _listed([_uid(e["principal"]) for e in who.to_dict()["entries"]])
    out["what_can"] = _listed(
        [f"{_uid(e['action'])} on {_uid(e['resource'])}" for e in what.to_dict()["entries"]]
    )
    return out


def _listed(items: list[str]) -> list[str]:
    if len(items) <= MAX_LISTED:
        return items
    more = len(items) - MAX_LISTED
    return [*items[:MAX_LISTED], f"... and {more} more (MAX_LISTED: {MAX_LISTED} are shown)"]


def _uid(uid: dict[str, str]) -> str:
    return f"{uid['type']}::{json.dumps(uid['id'])}"


def _engine(texts: dict[str, str]) -> Engine:
    """The editors' text as a store archive, loaded as any archive is."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("metadata.json", json.dumps(_METADATA))
        z.writestr("schema.polangschema", texts["schema"])
        z.writestr("policies/policies.polang", texts["policies"])
        z.writestr("entities/entities.json", texts["entities"].strip() or "[]")
    return Engine.from_archive_bytes({"ENGINE_LOG_TYPE": "off"}, buf.getvalue())


def _finding(f: Any) -> dict[str, Any]:
    span = getattr(f, "span", None)
    line, col = (span.line, span.column) if span is not None else (None, None)
    policy = getattr(f, "policy_id", None)
    named = f"policy {policy!r}: " if policy else ""
    return _problem("policies", f"{named}{getattr(f, 'message', f)}", line, col)


def _store_problem(p: Any) -> dict[str, Any]:
    editor = _FILES.get(p.file, _FILES.get(p.file.split("/")[-1], "store"))
    if editor == "store" and p.file.endswith(".polang"):
        editor = "policies"
    found = _LINE_COL.match(p.location or "")
    line, col = (int(found.group(1)), int(found.group(2))) if found else (None, None)
    where = "" if found or not p.location else f" (at {p.location})"
    return _problem(editor, f"{p.message}{where}", line, col)
