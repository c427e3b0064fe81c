"""The signal catalogue: operator sets, rules, hints and the verdict (expected values written by hand)."""

from __future__ import annotations

import pytest

from portscope.ingest import catalog, kineto_vocabulary
from portscope.ingest.catalog import Cause, OpCall, RegionFigures, Status
from portscope.ingest.schema import Direction, Phase, SignalKind


def test_every_signal_kind_has_a_spec_and_a_hint() -> None:
    assert set(catalog.SIGNALS) == set(SignalKind)
    assert catalog.hint_for(SignalKind.SYNC) == "try: avoid .item()/.tolist() and data-dependent shapes in the step"


@pytest.mark.parametrize(
    ("op", "bool_index", "cause"),
    [
        ("aten::_local_scalar_dense", False, Cause.ITEM),
        ("aten::item", False, Cause.ITEM),
        ("aten::masked_select", False, Cause.DATA_DEPENDENT_SHAPE),
        ("aten::unique_consecutive", False, Cause.DATA_DEPENDENT_SHAPE),
        ("aten::nonzero", False, Cause.DATA_DEPENDENT_SHAPE),
        ("aten::index.Tensor", True, Cause.BOOLEAN_INDEX),
        ("aten::index_put_", True, Cause.BOOLEAN_INDEX),
        ("aten::index.Tensor", False, None),  # integer indices: no sync
        ("aten::cat", True, None),  # a list of bool tensors is not an index
        ("aten::nonzero_static", False, None),  # fixed output size
        ("aten::add.Tensor", False, None),
    ],
)
def test_sync_rules(op: str, bool_index: bool, cause: Cause | None) -> None:
    rule = catalog.sync_cause(OpCall(op, bool_index=bool_index))
    assert (rule.cause if rule else None) is cause


def test_copy_ends_follow_aten_argument_order() -> None:
    # copy_(self, src): src -> self; _copy_from(self, dst): self -> dst
    assert catalog.copy_ends("aten::copy_", ["self", "src"], []) == ("src", "self")
    assert catalog.copy_ends("aten::_copy_from", ["self", "dst"], ["ret"]) == ("self", "dst")
    assert catalog.copy_ends("aten::_copy_from_and_resize", ["self", "dst"], []) == ("self", "dst")
    assert catalog.copy_ends("aten::_to_copy", ["x"], ["y"]) == ("x", "y")
    assert catalog.copy_ends("aten::add", ["a", "b"], ["c"]) is None
    assert catalog.copy_ends("aten::copy_", ["self"], []) is None  # an operand missing


def test_operator_sets_accept_overload_names() -> None:
    assert "aten::arange.start_step" in catalog.FACTORY_OPS
    assert "aten::zeros_like" in catalog.FACTORY_OPS
    assert "aten::add.Tensor" not in catalog.FACTORY_OPS
    assert catalog.never_falls_back("aten::empty.memory_format")
    assert catalog.never_falls_back("aten::copy_")
    assert not catalog.never_falls_back("aten::clone")
    assert catalog.dtype_agnostic("aten::clone")
    assert not catalog.dtype_agnostic("aten::mul.Tensor")


def test_index_arithmetic_gets_its_own_cause_and_hint() -> None:
    positions = OpCall("aten::add.Tensor", ("int64", "int64"), ("int64",))
    floats = OpCall("aten::add.Tensor", ("float32", "float32"), ("float32",))
    assert catalog.dtype_fallback_cause(positions) is Cause.INDEX_DTYPE
    assert catalog.dtype_fallback_cause(floats) is Cause.DTYPE_NOT_SUPPORTED
    assert "float16" not in catalog.cause_hint(Cause.INDEX_DTYPE)
    assert catalog.cause_hint(Cause.DTYPE_NOT_SUPPORTED, dtype="float16") == "try: compute in float16"
    assert catalog.cause_hint(Cause.UNALIGNED, multiple_of=64) == "try: pad to a multiple of 64"


@pytest.mark.parametrize(
    ("name", "direction"),
    [
        ("Memcpy HtoD (Pageable -> Device)", Direction.H2D),
        ("Memcpy DtoH (Device -> Pinned)", Direction.D2H),
        ("Memcpy DtoD (Device -> Device)", Direction.D2D),
        ("Memcpy PtoP (Device -> Device)", Direction.D2D),
        ("rbln_copy_h2d", Direction.H2D),
        ("v2h", Direction.D2H),
        ("Memset (Device)", None),
    ],
)
def test_copy_direction(name: str, direction: Direction | None) -> None:
    assert kineto_vocabulary.copy_direction(name) is direction


def test_rule_registry_rejects_duplicates() -> None:
    rules = catalog.RuleSet([catalog.SYNC_RULES["item"]])
    with pytest.raises(ValueError, match="'item' is registered twice"):
        rules.register(catalog.SYNC_RULES["item"])


def _figures(counts: dict[SignalKind, int], nbytes: dict[SignalKind, int] | None = None, *,
             phase: Phase = Phase.NONE, error: str | None = None) -> RegionFigures:
    return RegionFigures(counts, nbytes or {}, phase, error)


def test_verdict_reasons_and_status() -> None:
    v = catalog.verdict(_figures({SignalKind.CPU_FALLBACK: 3, SignalKind.TRANSFER_D2H: 2},
                                 {SignalKind.TRANSFER_D2H: 2500}))
    assert v.reasons == ("cpu_fallback: 3x (ran on CPU)", "d2h: 2x (device-to-host copies, 2.5 KB)")
    assert (v.clean, v.status) == (False, Status.NOT_CLEAN)


def test_recompile_is_unclean_only_when_warm() -> None:
    cold = catalog.verdict(_figures({SignalKind.RECOMPILE: 4}, phase=Phase.COLD))
    warm = catalog.verdict(_figures({SignalKind.RECOMPILE: 4}, phase=Phase.WARM))
    assert (cold.clean, cold.status) == (True, Status.COMPILES)
    assert warm.reasons == ("recompile: 4x (compiled in a warm region)",)


def test_error_makes_a_region_not_clean() -> None:
    v = catalog.verdict(_figures({}, error="RuntimeError: boom"))
    assert (v.clean, v.status, v.reasons) == (False, Status.ERROR, ("error: RuntimeError: boom",))


def test_h2d_alone_is_clean_and_worst_status() -> None:
    assert catalog.verdict(_figures({SignalKind.TRANSFER_H2D: 9})).status is Status.CLEAN
    assert catalog.worst_status([Status.CLEAN, Status.ERROR, Status.COMPILES]) is Status.ERROR
    assert catalog.worst_status([]) is Status.CLEAN


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("innermost dimension 16 is not a multiple of 64", Cause.UNALIGNED),
        ("float32 is not supported on this device", Cause.DTYPE_NOT_SUPPORTED),
        ("aten::nonzero: not implemented for the NPU", Cause.NO_KERNEL),
        ("non-contiguous view", Cause.VIEW),
        ("query length must be fixed", Cause.SHAPE_CONDITION),
        ("the moon is full", Cause.OTHER),
        ("", None),
    ],
)
def test_logged_fallback_reasons(text: str, cause: Cause | None) -> None:
    assert catalog.logged_cause(text) is cause
