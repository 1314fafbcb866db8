"""The request path's result and fact classes are ``polang._record`` records (start-up
time: ``@dataclass`` compiles each class's methods at import). They keep what they had as
dataclasses: keyword construction, defaults (fresh mutable ones per object), equality by
value and class, hashing of the frozen ones, ``repr``, immutability, pickling."""

from __future__ import annotations

import dataclasses
import pickle
import threading
from typing import Any

import pytest

from polang._record import Record, fields, replace
from polang.datalog.authorizer import Decision, PolicyErrorInfo
from polang.datalog.compiled import PolicyOutcome, RawDecision, ScopeKeys, Shape
from polang.datalog.facts import Request
from polang.engine import AuthorizeResult, BatchItemError, Diagnostics, Response
from polang.engine.snapshot import Snapshot
from polang.errors import EvaluationError, RequestError
from polang.language.entities import Entity
from polang.language.values import EntityUID, RecordValue
from polang.logs import LogSettings

U = EntityUID("User", "alice")
D = EntityUID("Doc", "d")
A = EntityUID("Action", "read")
BAD = RequestError("bad")  # one object: exceptions compare by identity

# (class, positional arguments, the same as keywords, frozen, expected repr)
CASES: list[tuple[type[Record], tuple[Any, ...], dict[str, Any], bool, str]] = [
    (
        Diagnostics,
        (["p"], [{"policy_id": "q", "error": "boom"}]),
        {"reason": ["p"], "errors": [{"policy_id": "q", "error": "boom"}]},
        True,
        "Diagnostics(reason=['p'], errors=[{'policy_id': 'q', 'error': 'boom'}])",
    ),
    (
        Response,
        ("deny", Diagnostics()),
        {"decision": "deny", "diagnostics": Diagnostics()},
        True,
        "Response(decision='deny', diagnostics=Diagnostics(reason=[], errors=[]))",
    ),
    (
        AuthorizeResult,
        (True, "r1", Response("allow", Diagnostics(["p"]))),
        {"decision": True, "request_id": "r1", "response": Response("allow", Diagnostics(["p"]))},
        True,
        "AuthorizeResult(decision=True, request_id='r1', response=Response(decision='allow',"
        " diagnostics=Diagnostics(reason=['p'], errors=[])), dropped_tokens=None)",
    ),
    (
        BatchItemError,
        (3, BAD),
        {"index": 3, "error": BAD},
        True,
        "BatchItemError(index=3, error=RequestError('bad'), decision=False)",
    ),
    (
        PolicyErrorInfo,
        ("p", "boom"),
        {"policy_id": "p", "error": "boom"},
        True,
        "PolicyErrorInfo(policy_id='p', error='boom', kind='evaluation')",
    ),
    (
        Decision,
        (False, ["p"]),
        {"allow": False, "reasons": ["p"]},
        False,
        "Decision(allow=False, reasons=['p'], errors=[])",
    ),
    (
        PolicyOutcome,
        ("p", True),
        {"policy_id": "p", "scope": True},
        False,
        "PolicyOutcome(policy_id='p', scope=True, value=None, error=None)",
    ),
    (
        RawDecision,
        (True, ["p"], []),
        {"allow": True, "reasons": ["p"], "errors": []},
        False,
        "RawDecision(allow=True, reasons=['p'], errors=[], outcomes=[])",
    ),
    (
        Shape,
        ("call", ("a", "b")),
        {"kind": "call", "preds": ("a", "b")},
        True,
        "Shape(kind='call', preds=('a', 'b'), value=None, op='', consts=())",
    ),
    (
        ScopeKeys,
        ({"principal": ("eq", U)}, frozenset({"principal"}), ()),
        {"keys": {"principal": ("eq", U)}, "bound": frozenset({"principal"}), "residual": ()},
        True,
        f"ScopeKeys(keys={{'principal': ('eq', {U!r})}}, bound=frozenset({{'principal'}}),"
        " residual=())",
    ),
    (
        Request,
        (U, A, D),
        {"principal": U, "action": A, "resource": D},
        False,
        f"Request(principal={U!r}, action={A!r}, resource={D!r}, context={RecordValue()!r})",
    ),
    (
        Entity,
        (U, {"name": "alice"}),
        {"uid": U, "attrs": {"name": "alice"}},
        False,
        f"Entity(uid={U!r}, attrs={{'name': {'alice'!r}}}, parents=set(), tags={{}})",
    ),
    (
        LogSettings,
        ("memory",),
        {"log_type": "memory"},
        True,
        "LogSettings(log_type='memory', level='WARN', ttl=60.0, max_items=10000,"
        " application_id='polang', decision_log_default_jwt_id='jti')",
    ),
]


def ids(case: tuple[Any, ...]) -> str:
    return str(case[0].__name__)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_keywords_defaults_equality_and_repr(case: tuple[Any, ...]) -> None:
    cls, args, kwargs, _frozen, shown = case
    a, b = cls(*args), cls(**kwargs)
    assert a == b
    assert not a != b  # noqa: SIM202 (__ne__ from __eq__)
    assert repr(a) == repr(b) == shown
    assert fields(cls) == cls.__match_args__ and len(fields(cls)) >= len(args)
    # a field changed: unequal; another class with the same fields: unequal
    first = fields(cls)[0]
    changed = "python" if cls is LogSettings else 7
    other = replace(a, **{first: changed})
    assert other != a and getattr(other, first) == changed
    assert a != tuple(getattr(a, f) for f in fields(cls))


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_frozen_ones_hash_and_refuse_assignment_mutable_ones_do_not_hash(
    case: tuple[Any, ...],
) -> None:
    cls, args, _kwargs, frozen, _shown = case
    a = cls(*args)
    name = fields(cls)[-1]
    if frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(a, name, getattr(a, name))
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(a, name)
    else:
        setattr(a, name, "x")
        assert getattr(a, name) == "x"
        with pytest.raises(TypeError, match="unhashable"):
            hash(a)
    with pytest.raises(AttributeError):
        a.not_a_field = 1  # slots: no other attribute (a dataclass with slots=True)


@pytest.mark.parametrize(
    "value",
    [
        PolicyErrorInfo("p", "boom", "extension"),
        Shape("const", value=3),
        ScopeKeys({}, frozenset({"resource"}), ("x",)),
        LogSettings("std_out", "debug"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_frozen_ones_hash_by_value(value: Record) -> None:
    twin = replace(value)
    assert twin is not value and twin == value
    if not isinstance(value, ScopeKeys):  # a dict field: unhashable, as a dataclass's
        assert hash(twin) == hash(value) and len({twin, value}) == 1


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_pickled_and_back(case: tuple[Any, ...]) -> None:
    cls, args, _kwargs, _frozen, _shown = case
    a = cls(*args)
    b = pickle.loads(pickle.dumps(a))
    if cls is BatchItemError:  # exceptions compare by identity
        assert (b.index, str(b.error), type(b.error)) == (3, "bad", RequestError)
    else:
        assert b == a and repr(b) == repr(a)


def test_mutable_defaults_are_fresh_per_object() -> None:
    e1, e2 = Entity(U), Entity(D)
    e1.attrs["a"] = "x"
    e1.parents.add(D)
    e1.tags["t"] = "y"
    assert (e2.attrs, e2.parents, e2.tags) == ({}, set(), {})
    assert Decision(True).reasons is not Decision(True).reasons
    assert Diagnostics().errors is not Diagnostics().errors
    assert RawDecision(True, [], []).outcomes is not RawDecision(True, [], []).outcomes
    assert Request(U, A, D).context == RecordValue()
    r = Request(None, A, D)
    assert r.var("principal") is None and r.var("context") == RecordValue()


def test_an_outcome_keeps_its_error() -> None:
    err = EvaluationError("overflow", "integer overflow")
    o = PolicyOutcome("p", True, None, err)
    assert o.error is err and o == PolicyOutcome("p", True, error=err)


def test_snapshot_defaults_and_token_processor_made_once() -> None:
    made: list[object] = []

    def make() -> Any:
        made.append(object())
        return made[-1]

    s = Snapshot(None, None, None, make, [])  # type: ignore[arg-type]
    assert s.action_token_problems == {} and s.clean_checks == {}
    assert s.tokens_required == frozenset() and s.processor is None
    assert isinstance(s.lock, type(threading.Lock()))
    assert s.tokens is s.tokens is made[0] and len(made) == 1
    other = Snapshot(None, None, None, make, [])  # type: ignore[arg-type]
    assert other.lock is not s.lock and other.clean_checks is not s.clean_checks
