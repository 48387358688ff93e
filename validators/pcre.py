"""An allow-list parser for the small part of PCRE syntax a route's regular expression may use.

Every RegularExpression a route supplies is wrapped by the renderer (``^<host prefix>(?=/)(?:<pattern>)``
in path-regex.map, ``'^(?:<pattern>)'`` or ``-m reg -- '<pattern>'`` in ACLs). The wrapper only keeps
its meaning if the pattern is one self-contained expression, and whether it is depends on how PCRE
reads it, not on how a parenthesis counter does: ``\\Q[\\E)|.*(\\Q]\\E?`` has balanced brackets for a
scanner that treats ``\\Q`` as an escaped letter, while PCRE reads a literal ``[``, a ``)`` that closes
the wrapper, and an unanchored ``.*`` alternative that takes every host's traffic.

So nothing is counted here: the pattern must parse, start to end, in a grammar whose every construct
means the same in PCRE 8.x (the 2.8 wheel) and PCRE2 (Debian's 3.x), and anything outside it is
refused with the construct named:

  pattern     := alternative ('|' alternative)*     (a top-level '|' only where the caller allows it)
  alternative := (atom quantifier?)*
  atom        := literal | '\\' punctuation | \\d \\D \\w \\W \\s \\S | \\t \\n \\r \\f | \\xHH | '.'
               | '(' pattern ')' | '(?:' pattern ')' | class | '^' | '$' | \\b | \\B   (the last four
                 are assertions: never quantified)
  quantifier  := ('*' | '+' | '?' | '{n}' | '{n,}' | '{n,m}') '?'?        (n, m <= 1000)
  class       := '[' '^'? item+ ']'; item := char | char '-' char | \\d ... | [:posix:]
                 ('[' and a '-' between items other than a range must be escaped; ']' too
                 unless it is the first member)

Refused, among others: ``\\Q..\\E`` quoting, ``(?#`` comments, inline options ``(?x)``/``(?i)``,
``(*VERB)``, backreferences and octal (``\\1``, ``\\g``, ``\\k``, ``\\0``), look-around, atomic and
named groups, conditionals, recursion, ``\\c``, ``\\x{..}``, ``\\p{..}``, ``\\K``, ``\\Q``, possessive
quantifiers, ``{,n}`` (a quantifier in recent PCRE2, literal text before), unescaped ``{ } ]``, and
characters outside printable ASCII (spaces only where the caller allows them: header and query
values).

Some patterns inside the grammar are still invalid for PCRE: bounds or a range in the wrong order
(``a{2,1}``, ``[z-a]``). Both engines refuse to compile those, so ``haproxy -c`` denies them with its
own message traced to the field; they cannot change what a compiled pattern means.
"""

from __future__ import annotations

MAX_REPEAT = 1000
MAX_DEPTH = 32
POSIX_CLASSES = frozenset(
    {"alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space",
     "upper", "word", "xdigit"})
_SHORTHANDS = frozenset("dDwWsS")
_CONTROL_ESCAPES = frozenset("tnrf")
_HEX = frozenset("0123456789abcdefABCDEF")
_NAMED_ESCAPES = {
    "Q": "\\Q...\\E quoting",
    "E": "\\E (end of \\Q quoting)",
    "c": "the control-character escape \\c",
    "x": "\\x{...} (write \\xHH with exactly two hex digits)",
    "o": "the octal escape \\o{...}",
    "g": "a backreference (\\g)",
    "k": "a named backreference (\\k)",
    "K": "the match-start reset \\K",
    "p": "a Unicode property (\\p)",
    "P": "a Unicode property (\\P)",
    "A": "the anchor \\A (use ^)",
    "z": "the anchor \\z (use $)",
    "Z": "the anchor \\Z (use $)",
    "G": "the anchor \\G",
    "C": "the single-code-unit escape \\C",
    "X": "the extended grapheme escape \\X",
    "R": "the newline-sequence escape \\R",
    "N": "the escape \\N",
    "h": "the escape \\h", "H": "the escape \\H", "v": "the escape \\v", "V": "the escape \\V",
    "e": "the escape \\e", "a": "the escape \\a",
}
_GROUP_KINDS = (
    ("(?#", "a (?#...) comment"),
    ("(?=", "a lookahead (?=...)"),
    ("(?!", "a negative lookahead (?!...)"),
    ("(?<=", "a lookbehind (?<=...)"),
    ("(?<!", "a negative lookbehind (?<!...)"),
    ("(?<", "a named group (?<name>...)"),
    ("(?P", "a named group or reference (?P...)"),
    ("(?'", "a named group (?'name'...)"),
    ("(?>", "an atomic group (?>...)"),
    ("(?|", "a branch-reset group (?|...)"),
    ("(?(", "a conditional group (?(...)...)"),
    ("(?R", "a recursion (?R)"),
    ("(?&", "a recursion (?&name)"),
    ("(?C", "a callout (?C...)"),
    ("(?+", "a recursion (?+n)"),
)


class RegexRefused(ValueError):
    """A pattern outside the subset; the message names the construct and its 0-based index."""


def problem(pattern: str, *, top_level_alternation: bool = False, spaces: bool = False) -> str | None:
    """Why ``pattern`` is outside the subset, or None.

    ``top_level_alternation``: a '|' outside any group is allowed (a value searched unanchored);
    ``spaces``: a literal space is allowed (header and query values; never in a map key).
    """
    try:
        _Parser(pattern, top_level_alternation=top_level_alternation, spaces=spaces).parse()
    except RegexRefused as exc:
        return str(exc)
    return None


class _Parser:
    def __init__(self, pattern: str, *, top_level_alternation: bool, spaces: bool) -> None:
        self.text = pattern
        self.pos = 0
        self.top_alt = top_level_alternation
        self.spaces = spaces

    def parse(self) -> None:
        self._alternation(depth=0)
        if self.pos < len(self.text):  # only a ')' stops the top-level alternation early
            raise RegexRefused(f"')' at index {self.pos} closes a group that was never opened")

    def _peek(self, offset: int = 0) -> str:
        at = self.pos + offset
        return self.text[at] if at < len(self.text) else ""

    def _alternation(self, depth: int) -> None:
        self._sequence(depth)
        while self._peek() == "|":
            if depth == 0 and not self.top_alt:
                raise RegexRefused(f"top-level '|' at index {self.pos} would escape the route's anchoring; "
                                   "wrap the alternatives in a group: (a|b)")
            self.pos += 1
            self._sequence(depth)

    def _sequence(self, depth: int) -> None:
        while self.pos < len(self.text) and self._peek() not in "|)":
            start = self.pos
            repeatable = self._atom(depth)
            if self._peek() in ("*", "+", "?", "{"):
                if not repeatable:
                    raise RegexRefused(f"quantifier {self._peek()!r} at index {self.pos} follows "
                                       f"{self.text[start:self.pos]!r}, which cannot be repeated")
                self._quantifier()

    def _quantifier(self) -> None:
        at = self.pos
        if self._peek() == "{":
            self._braces()
        else:
            self.pos += 1
        if self._peek() == "?":  # lazy
            self.pos += 1
        elif self._peek() == "+":
            raise RegexRefused(f"possessive quantifier at index {at} is not allowed; drop the '+'")
        if self._peek() in ("*", "+", "?", "{"):
            raise RegexRefused(f"quantifier {self._peek()!r} at index {self.pos} repeats a quantifier; "
                               "use a group: (?:a+)*")

    def _braces(self) -> None:
        at = self.pos
        end = self.text.find("}", at)
        body = self.text[at + 1 : end] if end >= 0 else ""
        low, comma, high = body.partition(",")
        ok = (0 < len(low) <= 4 and low.isdigit() and (not high or (len(high) <= 4 and high.isdigit()))
              and (comma or not high) and body.isascii())
        if not ok:
            raise RegexRefused(f"'{{' at index {at} is not a quantifier {{n}}, {{n,}} or {{n,m}}; "
                               "write \\{ for a literal brace")
        if int(low) > MAX_REPEAT or (high and int(high) > MAX_REPEAT):
            raise RegexRefused(f"quantifier at index {at} repeats more than {MAX_REPEAT} times")
        self.pos = end + 1

    def _atom(self, depth: int) -> bool:
        """Consume one atom; whether a quantifier may follow it."""
        ch = self._peek()
        at = self.pos
        if ch == "(":
            self._group(depth)
            return True
        if ch == "[":
            self._class()
            return True
        if ch == "\\":
            return self._escape(in_class=False) != "assertion"
        self.pos += 1
        if ch in ("^", "$"):
            return False
        if ch in ("*", "+", "?"):
            raise RegexRefused(f"quantifier {ch!r} at index {at} follows nothing it can repeat")
        if ch in ("{", "}", "]"):
            raise RegexRefused(f"{ch!r} at index {at} must be escaped: write \\{ch}")
        self._literal(ch, at)
        return True

    def _literal(self, ch: str, at: int) -> None:
        if ch == " ":
            if self.spaces:
                return
            raise RegexRefused(f"a space at index {at} is not allowed here")
        if not ("\x21" <= ch <= "\x7e"):
            raise RegexRefused(f"character {ch!r} at index {at} is outside printable ASCII; "
                               "only printable ASCII is allowed in a regular expression here")

    def _group(self, depth: int) -> None:
        at = self.pos
        if depth + 1 > MAX_DEPTH:
            raise RegexRefused(f"groups nest deeper than {MAX_DEPTH} at index {at}")
        if self._peek(1) == "*":
            raise RegexRefused(f"a (*VERB) at index {at} is not allowed")
        if self._peek(1) == "?":
            if self._peek(2) != ":":
                rest = self.text[at:]
                option = self._peek(2).isalpha() or self._peek(2) in ("-", "^", ")")
                what = next((name for prefix, name in _GROUP_KINDS if rest.startswith(prefix)),
                            "an inline option setting (?...)" if option else "a (?... construct")
                if self._peek(2).isdigit() or (self._peek(2) == "-" and self._peek(3).isdigit()):
                    what = "a recursion (?n)"
                raise RegexRefused(f"{what} at index {at} is not allowed; only (...) and (?:...) groups are")
            self.pos += 3
        else:
            self.pos += 1
        self._alternation(depth + 1)
        if self._peek() != ")":
            raise RegexRefused(f"'(' at index {at} is never closed; groups (...) and classes [...] must "
                               "close within the pattern")
        self.pos += 1

    def _escape(self, *, in_class: bool) -> str:
        """Consume a backslash escape: 'char' (one character), 'set' (\\d ...) or 'assertion' (\\b \\B)."""
        at = self.pos
        nxt = self._peek(1)
        if not nxt:
            raise RegexRefused(f"it ends with a lone '\\' at index {at}")
        if not "\x20" <= nxt <= "\x7e":
            raise RegexRefused(f"character {nxt!r} at index {at + 1} is outside printable ASCII")
        if not nxt.isalnum():  # a backslash before punctuation is always that character in PCRE
            if nxt == " " and not self.spaces:
                raise RegexRefused(f"a space at index {at + 1} is not allowed here")
            self.pos += 2
            return "char"
        if nxt in _SHORTHANDS:
            self.pos += 2
            return "set"
        if nxt in _CONTROL_ESCAPES:
            self.pos += 2
            return "char"
        if nxt == "x" and self._peek(2) and self._peek(3) and {self._peek(2), self._peek(3)} <= _HEX:
            self.pos += 4
            return "char"
        if nxt in ("b", "B") and not in_class:
            self.pos += 2
            return "assertion"
        if nxt.isdigit():
            what = "a backreference or octal escape"
        elif nxt == "b":
            what = "\\b inside a class (backspace)"
        else:
            what = _NAMED_ESCAPES.get(nxt, f"the escape \\{nxt}")
        raise RegexRefused(f"{what} at index {at} is not allowed")

    def _class(self) -> None:
        at = self.pos
        self.pos += 1
        if self._peek() == "^":
            self.pos += 1
        previous: str | None = None  # the last item: a single character, "set", or "range"
        if self._peek() == "]":  # a ']' first in a class is literal (PCRE 8 and PCRE2 without JS options)
            self.pos += 1
            previous = "]"
        while True:
            ch = self._peek()
            if not ch:
                raise RegexRefused(f"'[' at index {at} is never closed; groups (...) and classes [...] must "
                                   "close within the pattern")
            if ch == "]":
                self.pos += 1
                return
            if ch == "-" and previous is not None and self._peek(1) != "]":
                if previous in ("set", "range"):
                    raise RegexRefused(f"'-' at index {self.pos} after a class or range is ambiguous; "
                                       "write \\- for a literal '-'")
                dash = self.pos
                self.pos += 1
                high = self._class_item()
                if high in ("set", "range") or len(high) != 1:
                    raise RegexRefused(f"range at index {dash} does not end in a single character")
                previous = "range"
                continue
            previous = self._class_item()

    def _class_item(self) -> str:
        """One class member: the character it stands for, or "set" for \\d, [:alpha:], ..."""
        ch = self._peek()
        at = self.pos
        if ch == "\\":
            kind = self._escape(in_class=True)
            if kind == "set":
                return "set"
            return _escaped_char(self.text[at:self.pos])
        if ch == "[":
            if self._peek(1) == ":":
                end = self.text.find(":]", at + 2)
                name = self.text[at + 2 : end] if end >= 0 else ""
                if name not in POSIX_CLASSES:
                    raise RegexRefused(f"'[:' at index {at} is not a POSIX class like [:alpha:]")
                self.pos = end + 2
                return "set"
            raise RegexRefused(f"'[' at index {at} inside a class must be escaped: write \\[")
        if ch == "]":  # only reached as the end of a range
            raise RegexRefused(f"range at index {at - 1} has no end")
        self.pos += 1
        self._literal(ch, at)
        return ch


def _escaped_char(escape: str) -> str:
    """The character an accepted single-character escape stands for."""
    body = escape[1:]
    if body[0] == "x":
        return chr(int(body[1:3], 16))
    return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(body, body)
