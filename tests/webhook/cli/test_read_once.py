"""What a large check reads once and keeps (an input's ref, a state built from refs already read, whether
a verdict has warnings) says exactly what reading it again says."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from validators.changes import Change, Operation
from validators.findings import Finding, Severity
from validators.objects import Ref, ref_of
from validators.states import MemoryState
from webhook.gate.verdicts import Decision, Verdict
from webhook.loading.inputs import Located

NAMES = st.sampled_from(["a", "b", "web", "api"])
KINDS = st.sampled_from(["HTTPRoute", "Service", "Gateway", "GatewayClass"])


@st.composite
def objects(draw: st.DrawFn) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": draw(NAMES)}
    if draw(st.booleans()):
        meta["namespace"] = draw(NAMES)
    return {"apiVersion": "v1", "kind": draw(KINDS), "metadata": meta, "spec": {"n": draw(st.integers(0, 3))}}


@settings(max_examples=60, deadline=None)
@given(st.lists(objects(), max_size=12))
def test_a_state_built_from_refs_read_once_is_the_state_built_from_the_objects(objs: list[dict[str, Any]]) -> None:
    keyed = {ref_of(o): o for o in objs}
    fresh, kept = MemoryState(objs, version="v"), MemoryState.keyed(keyed, version="v")
    assert list(kept.kinds()) == list(fresh.kinds())
    assert kept.counts() == fresh.counts()
    assert kept.version == fresh.version
    for kind in fresh.kinds():
        assert [id(o) for o in kept.list(kind)] == [id(o) for o in fresh.list(kind)]
    for o in objs:
        ref = ref_of(o)
        assert kept.get(ref.kind, ref.namespace, ref.name) is fresh.get(ref.kind, ref.namespace, ref.name)


@settings(max_examples=40, deadline=None)
@given(objects(), st.sampled_from(list(Operation)), st.booleans())
def test_a_change_given_its_ref_is_the_change_that_reads_it(obj: dict[str, Any], op: Operation, dry: bool) -> None:
    located = Located(obj, "f.yaml", 1)
    obj_side, old_side = (None, obj) if op is Operation.DELETE else (obj, None)
    given_ref = Change.of(located.ref, op, obj_side, old_side, dry_run=dry)
    read = Change(op, obj_side, old_side, dry)
    assert given_ref == read
    assert given_ref.ref == read.ref == ref_of(obj) == located.ref


def test_an_input_copied_with_another_object_reads_the_new_objects_ref() -> None:
    from dataclasses import replace

    item = Located({"kind": "Service", "metadata": {"name": "a"}}, "f.yaml", 1)
    assert item.ref == Ref("Service", "", "a")
    moved = replace(item, obj={"kind": "Service", "metadata": {"name": "a", "namespace": "shop"}})
    assert moved.ref == Ref("Service", "shop", "a")


FINDINGS = st.builds(
    Finding, code=st.sampled_from(["RG0101", "RG0202"]), message=st.sampled_from(["m", "n"]),
    severity=st.sampled_from(list(Severity)),
    about=st.sampled_from(["", "HTTPRoute shop/a", "HTTPRoute shop/b", "Service shop/web"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(FINDINGS, max_size=6), st.lists(st.sampled_from(["needs a reload", "x"]), max_size=2),
       st.sampled_from(list(Decision)))
def test_has_warnings_is_whether_the_warnings_have_a_line(findings: list[Finding], notes: list[str],
                                                          decision: Decision) -> None:
    verdict = Verdict(decision, Ref("HTTPRoute", "shop", "a"), findings=tuple(findings), notes=tuple(notes))
    assert verdict.has_warnings == bool(verdict.warnings)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec=None)) | st.text(alphabet="ab\n\t\x1b\x7f\x85\u2028\u202e\u2066 "))
def test_clean_text_is_the_text_with_every_unsafe_character_escaped(text: str) -> None:
    from webhook.cli.reports import clean

    cleaned = clean(text)
    # the shortcut (a printable text as it is) and the escaping agree: printable out, and unchanged
    # exactly when nothing needed an escape; every printable character stays where it was
    assert cleaned.isprintable()
    assert (cleaned == text) is text.isprintable()
    assert all(c in cleaned for c in text if c.isprintable())
