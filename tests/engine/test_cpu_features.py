"""SERVEGATE_CPU_ISA: a newer CPU computes as an AVX2-only one (its AVX-512 and AMX flags
hidden, the kernels built without them), so the tests of both kinds run on either machine."""

import pytest

from engine.backends.kernels import cpu as cpu_kernels
from engine.backends.kernels import cpu_features
from engine.backends.kernels.cpu_features import cpu_flags, cpu_has_native_bf16, kernel_build_flags


def test_avx2_hides_avx512_and_amx_and_builds_without_them(monkeypatch):
    monkeypatch.setattr(
        cpu_features,
        "_proc_cpuinfo_flags",
        lambda: frozenset({"avx2", "fma", "f16c", "avx512f", "avx512_bf16", "amx_bf16"}),
    )
    monkeypatch.delenv("SERVEGATE_CPU_ISA", raising=False)
    native = cpu_flags()
    assert cpu_has_native_bf16() and kernel_build_flags() == []
    native_digest = cpu_kernels._digest([])
    monkeypatch.setenv("SERVEGATE_CPU_ISA", "avx2")
    assert cpu_flags() == {"avx2", "fma", "f16c"} < native
    assert not cpu_has_native_bf16()
    assert cpu_kernels.build_flags()[-2:] == ["-mno-avx512f", "-mno-amx-tile"]
    assert cpu_kernels._digest([]) != native_digest  # its own build: never the native one's


def test_an_unknown_isa_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("SERVEGATE_CPU_ISA", "avx9000")
    with pytest.raises(ValueError, match="SERVEGATE_CPU_ISA must be one of native, avx2"):
        cpu_flags()
