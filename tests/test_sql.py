"""The SQL loader's own logic: how a file of several statements is split."""

from __future__ import annotations

import pytest

from pipelines.sql import split_statements


@pytest.mark.fast
def test_statements_split_only_at_separators_outside_comments_strings_and_quoted_names() -> None:
    text = (
        "-- header; not a separator\n"
        "select ';' as a, `b;c` from t;\n"
        'select "x;y" as d -- trailing; comment\n'
        ";\n"
        "-- only a comment; after the last statement\n"
    )
    assert split_statements(text) == [
        "-- header; not a separator\nselect ';' as a, `b;c` from t",
        '\nselect "x;y" as d -- trailing; comment\n',
    ]
