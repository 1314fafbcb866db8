"""The legacy single-file store (JSON or YAML): wrapper and flat forms.

Schema and policy texts arrive Base64-encoded or in an object form; default entities are
Base64-encoded JSON in either entity form. Every decoded piece keeps the JSON path it
came from, so a problem inside decoded text still names the file and the record.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from typing import Any, Literal

from polang.config import Config
from polang.inputs.fields import Checker, is_version, jpath, listing, parse_legacy_date, show
from polang.inputs.problems import Problems
from polang.inputs.strict import load_json, load_yaml
from polang.store.raw import JsonPart, PolicyPart, RawStore, TextPart

WRAPPER_FIELDS = ("polang_version", "policy_stores")
RECORD_FIELDS = (
    "name",
    "description",
    "version",
    "policy_store_version",
    "polang_version",
    "policies",
    "schema",
    "trusted_issuers",
    "default_entities",
)
POLICY_FIELDS = ("polang_version", "name", "description", "creation_date", "policy_content")
CONTENT_FIELDS = ("encoding", "content_type", "body")
ENCODINGS = ("none", "base64")
DEFAULT_FLAT_ID = "default"


def read_legacy(
    text: str,
    *,
    file: str,
    fmt: Literal["json", "yaml"],
    config: Config,
    problems: Problems,
    source: str,
) -> RawStore:
    """Parse the file, select the store and gather its parts (problems collected)."""
    raw = RawStore(
        format="legacy-json" if fmt == "json" else "legacy-yaml",
        source=source,
        digest=hashlib.sha256(text.encode()).hexdigest(),
    )
    data = (
        load_json(text, file=file, problems=problems)
        if fmt == "json"
        else load_yaml(text, file=file, problems=problems)
    )
    if data is None:
        if not problems:
            problems.add("invalid_field", file, "the store file is empty", "$")
        return raw
    ck = Checker(problems, file)
    top = ck.obj(data, "$", "an object (the store or a policy_stores wrapper)")
    if top is None:
        return raw

    if "policy_stores" in top:
        ck.known(top, "$", WRAPPER_FIELDS, renamed={"tokens_metadata": "token_metadata"})
        top_version = _language_version(ck, top, "$")
        stores = ck.obj(top["policy_stores"], "$.policy_stores", "an object mapping ids to stores")
        if stores is None:
            return raw
        if not stores:
            problems.add("store_selection", file, "policy_stores holds no store", "$.policy_stores")
            return raw
        wanted = config.policy_store_id
        if wanted is not None:
            if wanted not in stores:
                problems.add(
                    "store_selection",
                    file,
                    f"no store with id {show(wanted)} (ENGINE_POLICY_STORE_ID); the file holds: "
                    + listing(sorted(map(str, stores))),
                    "$.policy_stores",
                )
                return raw
            store_id = wanted
        elif len(stores) == 1:
            store_id = str(next(iter(stores)))
        else:
            problems.add(
                "store_selection",
                file,
                f"the file holds {len(stores)} stores ("
                + listing(sorted(map(str, stores)))
                + "): set ENGINE_POLICY_STORE_ID to choose one",
                "$.policy_stores",
            )
            return raw
        path = jpath("$.policy_stores", store_id)
        record = ck.obj(stores[store_id], path, "a store object")
        if record is None:
            return raw
        raw.id = store_id
        raw.polang_version = top_version
        _read_record(record, path, raw, ck, config, flat=False)
    else:
        raw.id = config.policy_store_id or DEFAULT_FLAT_ID
        _read_record(top, "$", raw, ck, config, flat=True)
    return raw


def _language_version(ck: Checker, rec: Mapping[str, Any], path: str) -> str | None:
    """``vX.Y.Z`` (``v`` optional); ``""`` counts as absent (Cedarling's stores carry it)."""
    if rec.get("polang_version") == "":
        return None
    v = ck.string(rec, "polang_version", path)
    if v is not None and not is_version(v, v_prefix=True):
        ck.add(
            "invalid_field",
            jpath(path, "polang_version"),
            f"must have the form vX.Y.Z, got {show(v)}",
        )
        return None
    return v[1:] if v is not None and v[:1] in ("v", "V") else v


def _read_record(
    rec: Mapping[str, Any],
    path: str,
    raw: RawStore,
    ck: Checker,
    config: Config,
    *,
    flat: bool,
) -> None:
    ck.known(rec, path, RECORD_FIELDS, renamed={"tokens_metadata": "token_metadata"})
    raw.name = ck.string(rec, "name", path, required=not flat) or raw.id
    raw.description = ck.string(rec, "description", path, non_empty=False)
    if "version" in rec and "policy_store_version" in rec:
        ck.add(
            "invalid_field",
            jpath(path, "policy_store_version"),
            "give either 'version' or its alias 'policy_store_version', not both",
        )
    key = "version" if "version" in rec else "policy_store_version"
    raw.version = ck.string(rec, key, path)
    own_version = _language_version(ck, rec, path)
    if own_version is not None:
        raw.polang_version = own_version

    # schema
    if "schema" not in rec:
        ck.add("missing_field", jpath(path, "schema"), "required field 'schema' is missing")
    else:
        decoded = _content(
            rec["schema"], jpath(path, "schema"), ck, config, ("polang", "polang-json"), "schema"
        )
        if decoded is not None:
            text, content_type = decoded
            raw.schema = TextPart(ck.file, text, jpath(path, "schema"))
            raw.schema_format = "polang-json" if content_type == "polang-json" else "polang"

    # policies
    if "policies" not in rec:
        ck.add("missing_field", jpath(path, "policies"), "required field 'policies' is missing")
    else:
        ppath = jpath(path, "policies")
        pols = ck.obj(rec["policies"], ppath, "an object mapping policy ids to policy records")
        for pid, prec in (pols or {}).items():
            _read_policy(str(pid), prec, jpath(ppath, str(pid)), raw, ck, config)

    # trusted issuers
    if rec.get("trusted_issuers") is not None:
        ipath = jpath(path, "trusted_issuers")
        issuers = ck.obj(rec["trusted_issuers"], ipath, "an object mapping issuer ids to issuers")
        if issuers is not None:
            raw.issuers.append(JsonPart(ck.file, ipath, issuers))
            raw.issuer_records.update(issuers)

    # default entities
    if rec.get("default_entities") is not None:
        epath = jpath(path, "default_entities")
        ents = ck.obj(rec["default_entities"], epath, "an object mapping entity ids to Base64 JSON")
        if ents is not None:
            limit = config.max_default_entities
            if limit and len(ents) > limit:
                ck.add(
                    "limit",
                    epath,
                    f"{len(ents)} default entities exceed ENGINE_MAX_DEFAULT_ENTITIES ({limit})",
                )
                return
            for eid, value in ents.items():
                vpath = jpath(epath, str(eid))
                if isinstance(value, Mapping):
                    raw.entities.append(JsonPart(ck.file, vpath, value))
                    continue
                if not isinstance(value, str):
                    ck.add(
                        "invalid_field",
                        vpath,
                        "must be a Base64 string holding the entity JSON (or the entity object)",
                    )
                    continue
                decoded_text = _b64(value, vpath, ck, config)
                if decoded_text is None:
                    continue
                obj = load_json(decoded_text, file=ck.file, problems=ck.problems, location=vpath)
                if obj is None:
                    continue
                if not isinstance(obj, Mapping):
                    ck.add("entity", vpath, "the decoded default entity must be a JSON object")
                    continue
                raw.entities.append(JsonPart(ck.file, vpath, obj))


def _read_policy(
    pid: str, prec: object, path: str, raw: RawStore, ck: Checker, config: Config
) -> None:
    if not pid.strip():
        ck.add("missing_id", path, "a policy id (the record's key) must not be empty")
        return
    rec = ck.obj(prec, path, "a policy record object")
    if rec is None:
        return
    ck.known(rec, path, POLICY_FIELDS)
    _language_version(ck, rec, path)
    ck.string(rec, "name", path, non_empty=False)
    ck.string(rec, "description", path, non_empty=False)
    created = ck.string(rec, "creation_date", path)
    if created is not None and parse_legacy_date(created) is None:
        ck.add(
            "invalid_field",
            jpath(path, "creation_date"),
            f"must have the form YYYY-MM-DDTHH:MM:SS.ssssss, got {show(created)}",
        )
    if "policy_content" not in rec:
        ck.add(
            "missing_field",
            jpath(path, "policy_content"),
            "required field 'policy_content' is missing",
        )
        return
    cpath = jpath(path, "policy_content")
    decoded = _content(rec["policy_content"], cpath, ck, config, ("polang",), "policy_content")
    if decoded is None:
        return
    raw.policies.append(PolicyPart(ck.file, decoded[0], cpath, role="legacy", expected_id=pid))


def _content(
    value: object,
    path: str,
    ck: Checker,
    config: Config,
    content_types: tuple[str, ...],
    what: str,
) -> tuple[str, str] | None:
    """Decode the string form (Base64) or the object form; ``(text, content_type)``.

    The string form of a schema is the JSON schema form; of a policy, polang text.
    """
    if isinstance(value, str):
        text = _b64(value, path, ck, config)
        if text is None:
            return None
        return text, ("polang-json" if what == "schema" else "polang")
    rec = ck.obj(value, path, "a Base64 string or an object {encoding, content_type, body}")
    if rec is None:
        return None
    before = len(ck.problems)
    ck.known(rec, path, CONTENT_FIELDS)
    encoding = ck.string(rec, "encoding", path, required=True)
    if encoding is not None and encoding not in ENCODINGS:
        ck.add(
            "invalid_field",
            jpath(path, "encoding"),
            f"must be one of {', '.join(ENCODINGS)}, got {show(encoding)}",
        )
    content_type = ck.string(rec, "content_type", path, required=True)
    if content_type is not None and content_type not in content_types:
        ck.add(
            "invalid_field",
            jpath(path, "content_type"),
            f"must be {' or '.join(content_types)} for {what}, got {show(content_type)}",
        )
    body = ck.string(rec, "body", path, required=True, non_empty=False)
    if len(ck.problems) > before or body is None or content_type is None:
        return None
    if encoding == "base64":
        text = _b64(body, jpath(path, "body"), ck, config)
        if text is None:
            return None
        return text, content_type
    return body, content_type


def _b64(value: str, path: str, ck: Checker, config: Config) -> str | None:
    limit = config.max_base64_size
    if limit and len(value) > limit:
        ck.add(
            "limit",
            path,
            f"Base64 string of {len(value)} bytes exceeds ENGINE_MAX_BASE64_SIZE ({limit})",
        )
        return None
    compact = "".join(value.split())
    try:
        data = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        try:
            data = base64.urlsafe_b64decode(compact + "=" * (-len(compact) % 4))
            if base64.urlsafe_b64encode(data).rstrip(b"=") != compact.rstrip("=").encode():
                raise ValueError("not canonical") from None
        except (binascii.Error, ValueError):
            ck.add("base64", path, "not valid Base64")
            return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        ck.add("encoding", path, f"the decoded Base64 is not UTF-8 text ({e.reason})")
        return None
