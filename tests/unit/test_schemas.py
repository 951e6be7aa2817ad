"""The packaged JSON schemas: one loader, one order of problems, key paths in words."""

from __future__ import annotations

import jsonschema
import pytest
from nodegate.core import schemas


def test_every_packaged_schema_loads_once_and_is_a_valid_schema() -> None:
    names = schemas.names()
    assert {"actions", "admission", "baseline", "compare", "inventory", "waivers"} <= set(names)
    assert "profile" in names and "profile.hca" in names
    for name in names:
        doc = schemas.load(name)
        assert schemas.load(name) is doc  # cached
        jsonschema.Draft202012Validator.check_schema(doc)


def test_validate_raises_for_a_document_nodegate_wrote_wrong() -> None:
    with pytest.raises(jsonschema.ValidationError) as exc:
        schemas.validate("waivers", {"waivers": 1})
    assert str(exc.value) == "waivers.schema.json: waivers: 1 is not of type 'array', 'null'"
    schemas.validate("waivers", {"waivers": []})


def test_problems_come_in_key_path_order_with_their_path_in_words() -> None:
    doc = {"waivers": [{"check": "x"}, {"nope": 1}]}
    found = schemas.problems("waivers", doc)
    paths = [schemas.where(e) for e in found]
    assert paths == sorted(paths) and paths[0] == "waivers.0"
    assert schemas.where(schemas.problems({"type": "object"}, [])[0]) == "(top level)"
    assert schemas.key_path(["nodes", "gpu[001-004]", "ssh", "port"]) == (
        "nodes.gpu[001-004].ssh.port"
    )


def test_then_keyword_orders_one_path_by_the_keyword_that_failed() -> None:
    schema = {"type": "object", "required": ["a"], "additionalProperties": False}
    kinds = [e.validator for e in schemas.problems(schema, {"b": 1}, then_keyword=True)]
    assert kinds == ["additionalProperties", "required"]
