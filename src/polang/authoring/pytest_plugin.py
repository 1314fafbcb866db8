"""A pytest plugin: every case of every policy test file becomes a test item.

Enabled by the ``pytest11`` entry point of the polang package (or ``-p
polang.authoring.pytest_plugin``). It collects files named ``*.polangtest.yaml``,
``*.polangtest.yml`` and ``*.polangtest.json`` under the paths pytest is given; a failing
case reports what was expected, what happened and the explanation of why. One engine per
store is built per test file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polang.authoring.testing import (
    CaseResult,
    EngineCache,
    PolicyTestError,
    TestCase,
    TestFile,
    is_test_file,
    load_test_file,
    run_case,
)


class PolicyCaseFailed(Exception):
    """A case got another decision (or reasons, or errors) than it expects."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.case.name)
        self.result = result


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if is_test_file(file_path.name):
        return PolicyTestFile.from_parent(parent, path=file_path)
    return None


class PolicyTestFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        try:
            tf = load_test_file(self.path)
        except PolicyTestError as e:
            raise self.CollectError(str(e)) from None
        cache = EngineCache()
        self.session.config.add_cleanup(cache.close)
        for case in tf.cases:
            yield PolicyCase.from_parent(self, name=case.name, tf=tf, case=case, cache=cache)


class PolicyCase(pytest.Item):
    def __init__(
        self,
        *,
        tf: TestFile,
        case: TestCase,
        cache: EngineCache,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tf = tf
        self.case = case
        self.cache = cache

    def runtest(self) -> None:
        result = run_case(self.cache.get(self.tf), self.case)
        if not result.passed:
            raise PolicyCaseFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, PolicyCaseFailed):
            return excinfo.value.result.report()
        if isinstance(excinfo.value, PolicyTestError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"polang case {self.case.where}: {self.case.name}"
