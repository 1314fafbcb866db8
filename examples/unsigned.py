"""Unsigned authorization: the caller hands over the principal and resource entities.

Run from anywhere: ``python examples/unsigned.py``. It loads the example directory store
(``examples/stores/directory``) and decides a few requests about Acme's documents,
printing each decision with the policies that decided it and any policy errors.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from polang import Engine, RequestError

HERE = Path(__file__).resolve().parent
STORE = HERE / "stores" / "directory"
REQUESTS = HERE / "requests"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REQUESTS / name).read_text("utf-8"))
    return data


def changed(entity: dict[str, Any], **attrs: Any) -> dict[str, Any]:
    """A copy of an entity with some attributes replaced."""
    out = copy.deepcopy(entity)
    out["attrs"].update(attrs)
    return out


def main() -> None:
    alice = load("alice.json")  # clearance 2, in team finance of org acme
    roadmap = load("roadmap.json")  # owned by bob, internal, in org acme
    office = load("office-network.json")  # {"network": "corp"}
    secret = changed(roadmap, classification="secret")
    alice_ref = {"__entity": {"type": "Acme::User", "id": "alice"}}
    owned = changed(roadmap, owner=alice_ref)
    # A principal of a type the schema does not allow for "read" (Acme::User only).
    acme_org = {"uid": {"type": "Acme::Org", "id": "acme"}, "attrs": {"name": "Acme", "plan": "x"}}

    requests: list[tuple[str, str, dict[str, Any], dict[str, Any] | None, Any]] = [
        ("alice reads the roadmap", "read", roadmap, None, alice),
        ("alice edits the roadmap (clearance 2)", "edit", roadmap, None, alice),
        ("alice with clearance 3 edits it", "edit", roadmap, None, changed(alice, clearance=3)),
        ("alice deletes her own document", "delete", owned, None, alice),
        ("alice reads a secret document", "read", secret, None, alice),
        ("... from the corporate network", "read", secret, office, alice),
        ("alice's own secret document, corp network", "read", changed(secret, owner=alice_ref),
         office, alice),
        ("no principal reads the roadmap", "read", roadmap, None, None),
    ]  # fmt: skip

    with Engine({"ENGINE_POLICY_STORE_LOCAL_FN": str(STORE)}) as engine:
        print(f"store {engine.store.id} version {engine.store.version}")
        for text, action, resource, context, principal in requests:
            result = engine.authorize_unsigned(
                f'Acme::Action::"{action}"', resource, context, principal
            )
            diag = result.response.diagnostics
            line = f"{result.response.decision.upper():5}  {text}"
            if diag.reason:
                line += f"  [{', '.join(diag.reason)}]"
            print(line)
            for err in diag.errors:
                print(f"       error in {err['policy_id']}: {err['error']}")

        # Malformed requests are exceptions that say what and where.
        bad: list[tuple[str, dict[str, Any], Any]] = [
            ("read", changed(roadmap, public="yes"), alice),
            ("read", roadmap, acme_org),
            ("archive", roadmap, alice),
        ]
        for action, resource, principal in bad:
            try:
                engine.authorize_unsigned(f'Acme::Action::"{action}"', resource, None, principal)
            except RequestError as e:
                print(f"rejected: {e}")


if __name__ == "__main__":
    main()
