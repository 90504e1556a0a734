"""The section registry: every section declared once, and the walkers follow the declarations."""

from __future__ import annotations

from hypothesis import given

from loaderkit.plan.fingerprint import stream_fields
from loaderkit.plan.plan import PLAN_SECTIONS, LoaderPlan
from loaderkit.plan.rules import RULE_ORDER
from loaderkit.plan.sections import BUILDER_CALL_ORDER, EXPLAIN_ORDER, FILE_KEYS, SECTIONS
from loaderkit.testing import plans


def test_every_plan_section_is_declared_once():
    names = [section.name for section in SECTIONS]
    assert sorted(names) == sorted(PLAN_SECTIONS)
    assert len({section.key for section in SECTIONS}) == len(SECTIONS)
    assert ("schema_version", *(s.key for s in SECTIONS)) == FILE_KEYS


def test_the_builder_call_order_lists_each_section_with_calls_once():
    with_calls = {s.name for s in SECTIONS if s.builder_calls is not None}
    ordered = [s.name for s in BUILDER_CALL_ORDER]
    assert len(ordered) == len(set(ordered))
    assert set(ordered) == with_calls
    assert with_calls == set(PLAN_SECTIONS) - {"preset"}  # a preset shows as its call instead


def test_the_explain_order_lists_each_section_with_rows_once():
    ordered = [s.name for s in EXPLAIN_ORDER]
    assert len(ordered) == len(set(ordered))
    with_rows = {s.name for s in SECTIONS if s.explain is not None}
    assert set(ordered) == with_rows | {"order", "batch"}  # written in plan/display.py
    assert not {"order", "batch"} & with_rows


def test_the_rule_order_runs_each_declared_rule_group_once():
    declared = [(s.name, group) for s in SECTIONS for group in s.rules]
    for name, group in declared:  # a group is its section's name, or "<section>.<group>"
        assert group == name or group.startswith(f"{name}."), (name, group)
    assert len(RULE_ORDER) == len(set(RULE_ORDER))
    assert sorted(RULE_ORDER) == sorted(group for _, group in declared)


def test_every_section_has_rows_of_its_kind():
    for section in SECTIONS:
        assert section.rows, section.name
        kinds = {row.kind for row in section.rows}
        if section.fingerprint in ("exec", "info"):
            assert kinds == {section.fingerprint}, section.name
        else:
            assert kinds & {"stream", "both"}, section.name


@given(plans())
def test_only_hashed_sections_reach_the_fingerprint(plan: LoaderPlan):
    hashed = set(stream_fields(plan)) - {"fingerprint_version"}
    declared = {s.name for s in SECTIONS if s.fingerprint in ("stream", "both")}
    assert hashed <= declared
    for section in SECTIONS:
        entries = section.stream_entries(plan)
        assert set(entries) <= {section.name}
        if section.name in entries and isinstance(entries[section.name], dict):
            assert not set(entries[section.name]) & set(section.execution_only), section.name


@given(plans())
def test_written_tables_are_the_declared_ones(plan: LoaderPlan):
    data = plan.to_dict()
    for section in SECTIONS:
        value = getattr(plan, section.name)
        assert (section.key in data) == section.written(value), section.name
    assert list(data) == [k for k in FILE_KEYS if k in data]
