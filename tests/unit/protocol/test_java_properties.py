"""protocol.java_properties: the .properties format as java.util.Properties.load reads it."""

from __future__ import annotations

import pytest

from protocol.java_properties import PropertiesFormatError, parse_properties


def test_separators_comments_blank_lines_and_trimming() -> None:
    text = (
        "# a comment\n! another comment\n\n   \t\na=1\nb = 2  \nc: 3\nd 4\n   e=5\nf=\ng\nh=x=y:z\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "e": "5",
        "f": "",
        "g": "",
        "h": "x=y:z",
    }


def test_continuation_lines_drop_the_next_lines_leading_whitespace() -> None:
    text = "log.dirs=/a,\\\n    /b,\\\n\t/c\nnext=1\n"
    assert parse_properties(text) == {"log.dirs": "/a,/b,/c", "next": "1"}


def test_an_even_number_of_backslashes_does_not_continue() -> None:
    assert parse_properties("a=x\\\\\nb=2\n") == {"a": "x\\", "b": "2"}


def test_a_comment_ending_in_a_backslash_does_not_continue() -> None:
    assert parse_properties("# comment \\\na=1\n") == {"a": "1"}


def test_continuation_at_end_of_file() -> None:
    assert parse_properties("a=1\\") == {"a": "1"}


def test_escapes_and_line_endings() -> None:
    text = "k\\:ey=v\\=1\r\nu=\\u0041\\tB\rsp=a\\ \n"
    assert parse_properties(text) == {"k:ey": "v=1", "u": "A\tB", "sp": "a "}


def test_later_keys_win() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(PropertiesFormatError, match=r"f line 2: malformed \\uxxxx"):
        parse_properties("a=1\nb=\\u12\n", source="f")
