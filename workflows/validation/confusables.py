"""Look-alike characters: ``weather.temperature`` spelt with a Cyrillic ``e`` (U+0435)
reads as a reference to a person and as plain text to the engine.

A small table of the letters that pass for ASCII in identifiers (Cyrillic, Greek,
a few Latin variants and full-width forms); anything else non-ASCII is described
by its Unicode name. Step ids and tool names are ASCII by their patterns, so a
look-alike there is named in the ``schema_invalid`` message; in a mapping value it
is ``confusable_character`` when the ASCII reading would be a reference.
"""

from __future__ import annotations

import unicodedata

# look-alike -> the ASCII it passes for
CONFUSABLES: dict[str, str] = {
    # Cyrillic
    "\u0430": "a", "\u0432": "b", "\u0435": "e", "\u0451": "e", "\u043a": "k", "\u043c": "m",
    "\u043d": "h", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0442": "t", "\u0443": "y",
    "\u0445": "x", "\u0455": "s", "\u0456": "i", "\u0457": "i", "\u0458": "j", "\u04bb": "h",
    "\u0501": "d", "\u051b": "q", "\u051d": "w", "\u04cf": "l", "\u044c": "b", "\u0410": "A",
    "\u0412": "B", "\u0415": "E", "\u041a": "K", "\u041c": "M", "\u041d": "H", "\u041e": "O",
    "\u0420": "P", "\u0421": "C", "\u0422": "T", "\u0423": "Y", "\u0425": "X", "\u0405": "S",
    "\u0406": "I", "\u0408": "J",
    # Greek
    "\u03b1": "a", "\u03b5": "e", "\u03b9": "i", "\u03ba": "k", "\u03bd": "v", "\u03bf": "o",
    "\u03c1": "p", "\u03c4": "t", "\u03c5": "u", "\u03c7": "x", "\u0391": "A", "\u0392": "B",
    "\u0395": "E", "\u0396": "Z", "\u0397": "H", "\u0399": "I", "\u039a": "K", "\u039c": "M",
    "\u039d": "N", "\u039f": "O", "\u03a1": "P", "\u03a4": "T", "\u03a5": "Y", "\u03a7": "X",
    # Latin variants and punctuation
    "\u0131": "i", "\u0237": "j", "\u2113": "l", "\ua7b5": "b", "\u0261": "g", "\u2010": "-",
    "\u2011": "-", "\u2013": "-", "\u2024": ".", "\uff3f": "_", "\uff04": "$",
}  # fmt: skip


def ascii_of(char: str) -> str | None:
    """The ASCII a character passes for, or ``None`` when it passes for none."""
    if char in CONFUSABLES:
        return CONFUSABLES[char]
    folded = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
    return folded if len(folded) == 1 and folded != char else None


def skeleton(text: str) -> str:
    """``text`` with every look-alike replaced by the ASCII it passes for."""
    return "".join(ascii_of(c) or c if ord(c) > 127 else c for c in text)


def describe(text: str) -> str:
    """``"`X` (CYRILLIC SMALL LETTER IE, U+0435) looks like `e`"`` for each look-alike."""
    parts = []
    for char in dict.fromkeys(c for c in text if ord(c) > 127):
        twin = ascii_of(char)
        if twin is not None:
            name = unicodedata.name(char, "an unnamed character")
            parts.append(f"`{char}` ({name}, U+{ord(char):04X}) looks like `{twin}`")
    return "; ".join(parts)
