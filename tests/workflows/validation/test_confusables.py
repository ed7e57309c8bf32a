"""workflows.validation.confusables: look-alike letters are mapped to the ASCII they pass
for and named by their Unicode name; other non-ASCII text is left alone."""

from __future__ import annotations

from workflows.validation.confusables import ascii_of, describe, skeleton

CYRILLIC_E = "\u0435"


def test_a_table_letter_and_a_folded_accent_pass_for_ascii():
    assert ascii_of(CYRILLIC_E) == "e"
    assert ascii_of("\u03bf") == "o"  # Greek omicron
    assert ascii_of("\uff04") == "$"  # full-width dollar: `$input` spelt with it
    assert ascii_of("é") == "e"  # NFKD folds it


def test_a_letter_that_passes_for_nothing_is_none():
    assert ascii_of("ж") is None
    assert ascii_of("日") is None


def test_the_skeleton_is_what_a_person_reads():
    assert skeleton(f"w{CYRILLIC_E}ather.t{CYRILLIC_E}mperature") == "weather.temperature"
    assert skeleton("plain.ascii") == "plain.ascii"
    assert skeleton("жара") == "жapa"  # only the letters that pass for ASCII change


def test_describe_names_each_look_alike_once():
    text = describe(f"w{CYRILLIC_E}ath{CYRILLIC_E}r")
    assert text == f"`{CYRILLIC_E}` (CYRILLIC SMALL LETTER IE, U+0435) looks like `e`"
    assert describe("weather") == ""
