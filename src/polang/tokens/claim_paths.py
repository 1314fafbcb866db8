"""Claim paths: one way to name a claim, top-level or nested, in token metadata and policies.

Identity providers put what a policy needs in different places: Keycloak nests roles in
objects (``realm_access.roles``, ``resource_access.<client>.roles``), Auth0 puts custom
claims under URL names (``https://example.com/roles``), Okta and Entra ID use top-level
arrays. A **claim path** names any of them: claim names joined by ``.``. Walking a token,
each step takes the *longest* run of the remaining parts that is a key of the current
object, so a claim whose own name holds dots (Auth0's namespaced claims) is found whole,
and a top-level claim named exactly like the path wins over a nested one.

The same text names the value everywhere: in ``role_mapping``, ``claim_mapping`` keys,
``required_claims``, ``token_id``, ``user_id``, ``workload_id`` and, in a policy, as the
tag ``getTag("realm_access.roles")`` (every key of an object claim is a tag named by its
path, :func:`nested_tags`). Paths walk objects only, never into arrays.

Limits (``docs/security.md``): a path in a store is at most :data:`MAX_CLAIM_PATH_CHARS`
characters and :data:`MAX_CLAIM_PATH_DEPTH` objects deep; a token gives at most
:data:`MAX_NESTED_CLAIM_TAGS` nested tags (more drops the token: leaving some out could
hide a claim a ``forbid`` tests).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from polang.inputs.fields import closest, json_kind

#: Longest claim path a store may name (characters). Auth0 namespaced claims are URLs of a
#: few dozen characters; nothing real comes near it.
MAX_CLAIM_PATH_CHARS = 256
#: Most objects a path walks (the top-level claim is the first); also the deepest nesting
#: that :func:`nested_tags` turns into tags. Keycloak's ``resource_access.<client>.roles``
#: is 3.
MAX_CLAIM_PATH_DEPTH = 8
#: Most tags one token's nested objects give (the token is dropped beyond it).
MAX_NESTED_CLAIM_TAGS = 1000

# ``https://host`` at the start of a path: the dots of the host never separate parts.
_URL_HOST = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,20}://[^/]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: Claim names of the identity providers docs/identity-providers.md covers (and the
#: registered ones): a path whose first part is close to one of these but not it is
#: reported as a likely misspelling when the store loads.
KNOWN_CLAIMS: tuple[str, ...] = (
    "realm_access",
    "resource_access",
    "roles",
    "groups",
    "scope",
    "scp",
    "wids",
    "role",
    "permissions",
    "azp",
    "client_id",
    "preferred_username",
    "email",
    "tid",
    "oid",
    "sub",
    "aud",
    "jti",
    "iss",
)


def path_depth(path: str) -> int:
    """How many objects ``path`` walks at most: its ``.``-separated parts, not counting the
    dots of a leading URL's host (``https://example.com/roles`` is one part)."""
    host = _URL_HOST.match(path)
    rest = path[host.end() :] if host else path
    return rest.count(".") + 1


def path_problem(path: str) -> str | None:
    """Why a claim path can never name a claim (the store is refused), or ``None``."""
    if not path:
        return "must not be empty"
    if len(path) > MAX_CLAIM_PATH_CHARS:
        return (
            f"is {len(path):,} characters long, more than a claim path may be "
            f"({MAX_CLAIM_PATH_CHARS}: MAX_CLAIM_PATH_CHARS)"
        )
    if path != path.strip():
        return "has leading or trailing whitespace"
    if _CONTROL.search(path):
        return "holds a control character"
    if path.startswith("$"):
        return "looks like JSONPath, which is not supported: write the claim names joined by '.'"
    if path.startswith("/"):
        return (
            "looks like a JSON Pointer, which is not supported: write the claim names "
            "joined by '.' (realm_access.roles)"
        )
    if re.search(r"\[\s*[0-9*'\"]", path):
        return "indexes into an array, which paths do not: a path walks objects only"
    if path.startswith(".") or path.endswith(".") or ".." in path:
        return "has an empty part (a leading, trailing or doubled '.')"
    depth = path_depth(path)
    if depth > MAX_CLAIM_PATH_DEPTH:
        return (
            f"is {depth} levels deep, more than a claim path may be "
            f"({MAX_CLAIM_PATH_DEPTH}: MAX_CLAIM_PATH_DEPTH)"
        )
    return None


def misspelt_claim(path: str) -> str | None:
    """A well-known claim name ``path``'s first part is probably a misspelling of."""
    first = path.split(".", 1)[0]
    if first in KNOWN_CLAIMS or len(first) < 4 or len(first) > 40:
        return None
    near = closest(first, KNOWN_CLAIMS, cutoff=0.85)
    if near is None:
        return None
    short, long = sorted((first, near), key=len)
    if long == short + "s" and not short.endswith("s"):
        return None  # ``scopes``, ``group``: a plural or singular is a claim of its own
    return near


@dataclass(frozen=True, slots=True)
class Miss:
    """Where a path stopped in a token: the part it did not find and the keys that were
    there (names only, never values), or the JSON kind it could not walk into."""

    found: str  # the part of the path that did resolve ("" for none)
    wanted: str  # the next part(s) looked for
    keys: tuple[str, ...]  # keys of the object where it stopped (empty: not an object)
    kind: str | None = None  # the JSON kind met instead of an object

    def describe(self) -> str:
        where = f"'{self.found}'" if self.found else "the token"
        if not self.wanted:
            return f"{where} is {self.kind}"
        if self.kind is not None:
            return f"{where} is {self.kind}, not an object with '{self.wanted}'"
        # on a miss only, and once per path and store (see the processor)
        near = closest(self.wanted.split(".", 1)[0], self.keys[:200])
        hint = f"; did you mean '{_join(self.found, near)}'?" if near else ""
        return f"{where} has no '{self.wanted.split('.', 1)[0]}'{hint}"


def _join(a: str, b: str) -> str:
    return f"{a}.{b}" if a else b


_MISSING = object()


def resolve(claims: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` in a token's claims, or ``None`` when there is none."""
    if "." not in path:
        return claims.get(path)
    value = _walk(claims, path)
    return None if isinstance(value, Miss) else value


def locate(claims: Mapping[str, Any], path: str) -> Any:
    """The value at ``path``, or a :class:`Miss` saying where the walk stopped."""
    if "." not in path:
        value = claims.get(path, _MISSING)
        if value is _MISSING:
            return Miss("", path, tuple(str(k) for k in claims))
        if value is None:
            return Miss(path, "", (), "null")
        return value
    return _walk(claims, path)


def _walk(claims: Mapping[str, Any], path: str) -> Any:
    parts = path.split(".")
    current: Any = claims
    i = 0
    done = ""
    for _ in range(MAX_CLAIM_PATH_DEPTH):
        if not isinstance(current, Mapping):
            return Miss(done, ".".join(parts[i:]), (), json_kind(current))
        for j in range(len(parts), i, -1):  # the longest run of parts that is a key
            key = ".".join(parts[i:j])
            if key in current:
                break
        else:
            return Miss(done, ".".join(parts[i:]), tuple(str(k) for k in current))
        current = current[key]
        done = _join(done, key)
        i = j
        if i == len(parts):
            if current is None:
                return Miss(done, "", (), "null")
            return current
    return Miss(done, ".".join(parts[i:]), (), "too deep")


class TooManyNestedTags(Exception):
    """A token's nested objects give more tags than :data:`MAX_NESTED_CLAIM_TAGS`."""


def nested_tags(claims: Mapping[str, Any], skip: Iterable[str] = ()) -> dict[str, Any]:
    """Every key inside an object claim, by its path (``realm_access.roles``), with its
    value: the tags of nested claims. A top-level claim of the same name wins (it is not
    listed here); objects nested deeper than :data:`MAX_CLAIM_PATH_DEPTH` stay the JSON
    text of their parent's tag. Raises :class:`TooManyNestedTags` past the limit."""
    out: dict[str, Any] = {}
    skipped = frozenset(skip)
    stack: list[tuple[str, Mapping[str, Any], int]] = [
        (str(name), value, 2)
        for name, value in claims.items()
        if isinstance(value, Mapping) and name not in skipped
    ]
    while stack:
        prefix, obj, depth = stack.pop()
        for key, value in obj.items():
            path = f"{prefix}.{key}"
            if path in claims or path in out:
                continue  # a claim (or an earlier path) of that name wins
            if len(out) >= MAX_NESTED_CLAIM_TAGS:
                raise TooManyNestedTags(
                    f"the token's object claims hold more than {MAX_NESTED_CLAIM_TAGS:,} "
                    f"nested claims (MAX_NESTED_CLAIM_TAGS)"
                )
            out[path] = value
            if isinstance(value, Mapping) and depth < MAX_CLAIM_PATH_DEPTH:
                stack.append((path, value, depth + 1))
    return out
