"""Types: gradual dims, structural equality and hashing, normalisation, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from relay_ir.ty import (
    ANY,
    AnyDim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    ShapeVar,
    TensorType,
    TupleType,
    TypeCall,
    TypeVar,
    as_dim,
    is_dynamic,
    scalar_type,
)
from tessel_errors import RelayError


def test_dims_normalise_from_user_values():
    t = TensorType([1, np.int64(3), None, "?", "n"])
    assert t.shape == (1, 3, ANY, ANY, ShapeVar("n"))
    assert type(t.shape[1]) is int


def test_any_is_a_singleton_value_and_prints_as_question_mark():
    assert AnyDim() == ANY and hash(AnyDim()) == hash(ANY)
    assert str(ANY) == "?" and repr(ANY) == "?"


@pytest.mark.parametrize("bad", [-1, 2.5, True, "3x", object()])
def test_bad_dims_are_errors(bad):
    with pytest.raises(RelayError, match="bad shape dimension"):
        as_dim(bad)


def test_types_compare_and_hash_structurally():
    a = TensorType((1, "n"), "float16")
    b = TensorType((1, ShapeVar("n")), "float16")
    assert a == b and hash(a) == hash(b)
    assert a != TensorType((1, "m"), "float16")
    assert a != TensorType((1, "n"), "float32")
    assert {a: 1}[b] == 1
    assert TupleType([a]) == TupleType((b,))
    gtv = GlobalTypeVar("List")
    assert TypeCall(gtv, [a]) == TypeCall(GlobalTypeVar("List"), (b,))
    assert FuncType([a], b, [TypeVar("A")]) == FuncType((a,), a, (TypeVar("A"),))
    assert RefType(a) == RefType(b) and IncompleteType(3) != IncompleteType(4)


def test_types_are_immutable():
    t = TensorType((1,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.dtype = "int8"


def test_is_dynamic():
    assert not is_dynamic(TensorType((1, 3)))
    assert is_dynamic(TensorType((1, None)))
    assert is_dynamic(TensorType(("n",)))
    assert not is_dynamic(TupleType(()))


def test_scalar_type_and_rank():
    s = scalar_type("int64")
    assert s.shape == () and s.ndim == 0 and s.dtype == "int64"
    assert TensorType((2, 3)).ndim == 2


def test_type_data_looks_up_constructors_by_name():
    import relay_ir as r

    mod = r.IRModule().import_prelude()
    td = mod[mod.get_global_type_var("Option")]
    assert td.constructor("Some").tag == 0
    with pytest.raises(RelayError, match=r"type Option has no constructor 'Maybe'.*Some"):
        td.constructor("Maybe")
