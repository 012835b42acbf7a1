"""Text others wrote, made safe to print: every character outside " " to "~" replaced."""

from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks.terminal import printable
from tests.conftest import any_character


@given(st.text(alphabet=any_character(), max_size=300))
def test_printable_replaces_exactly_what_is_not_printable_ascii(text):
    assert printable(text) == "".join(char if " " <= char <= "~" else "?"
                                      for char in text[:200])


def test_printable_keeps_plain_text_and_cuts_it_at_200():
    assert printable("job 42 reports") == "job 42 reports"
    assert printable("x" * 300) == "x" * 200
    assert printable("a\x1b[31mb\x7f\u00e9\n") == "a?[31mb???"
