"""Packages for setuptools: engine and harness, plus the repository's suites/ and templates/
carried inside the harness package as harness/_data/ (harness.shipped_dir finds them there
when the harness runs from a wheel rather than from this checkout)."""

from setuptools import find_packages, setup

DATA = {"harness._data.suites": "suites", "harness._data.templates": "templates"}

setup(
    packages=find_packages(include=["engine*", "harness*"]) + list(DATA),
    py_modules=["servegate_pytest"],  # the pytest plugin, under a name no repository shadows
    package_dir=DATA,
    package_data={
        "engine": [
            "backends/kernels/csrc/*.cpp",
            "backends/kernels/csrc/*.h",
            "sim/data/*.toml",
            "sim/data/shapes/*.json",
        ],
        "harness._data.suites": ["*.toml", "traces/*.jsonl", "lengths/*.jsonl", "lengths/*.md"],
        "harness._data.templates": ["*.j2"],
    },
)
