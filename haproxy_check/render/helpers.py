"""Backend() and RegisterMap(): the template helpers that emit configuration AND describe it (seed 000).

Every backend section and every map file goes through a ``Recorder``. It writes the text and keeps the
structured ``Description`` the reload-vs-runtime classifier reads: backend records with servers,
named ``defaults haptic-be-<hash>`` profiles shared by identical settings, map entries with their
order flag, and files (certificates). ``Backend()`` is strict: an unknown key fails the render with
the key and the template location, as seed 000 requires.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from haproxy_check import escaping
from haproxy_check.descriptions import BackendDesc, Description, FileDesc, MapDesc, ProfileDesc, ServerDesc
from haproxy_check.render.sourcemaps import SourceMap
from haproxy_check.runtime import slots

BACKEND_KEYS = frozenset({"name", "mode", "balance", "hashType", "profile", "body", "servers", "defaultServer",
                          "guid", "comments", "shape", "shapeReason"})
SERVER_KEYS = frozenset({"name", "address", "port", "weight", "options"})
MAP_OPTION_KEYS = frozenset({"ordered"})


class TemplateError(Exception):
    """A template used a helper wrongly; the message names the template and line."""


def template_location() -> str:
    """``file.cfg.j2:LINE`` of the innermost template frame on the stack (jinja2 maps line numbers)."""
    frame = sys._getframe(1)
    while frame is not None:
        tmpl = frame.f_globals.get("__jinja_template__")
        if tmpl is not None:
            return f"{tmpl.name}:{tmpl.get_corresponding_lineno(frame.f_lineno)}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<python>"


def _fail(message: str) -> TemplateError:
    return TemplateError(f"{message} (at {template_location()})")


def _lines(value: Any, key: str) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = value.split("\n")
    elif type(value) is not tuple and type(value) is not list and not isinstance(value, Sequence):
        raise _fail(f"Backend() key {key!r} must be a list of lines")
    out = []
    for line in value:
        if not isinstance(line, str):
            raise _fail(f"Backend() key {key!r} must be a list of strings")
        if line.strip():
            out.append(line.strip())
    return tuple(out)


def _server(raw: Any) -> ServerDesc:
    if isinstance(raw, ServerDesc):
        return raw
    if not isinstance(raw, Mapping):
        raise _fail("Backend() servers must be records {name, address, port, weight, options}")
    unknown = sorted(set(raw) - SERVER_KEYS)
    if unknown:
        raise _fail(f"Backend() server record has unknown key {unknown[0]!r}")
    port = raw.get("port")
    weight = raw.get("weight", 1)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise _fail(f"Backend() server port {port!r} is not a port number")
    if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= 256:
        raise _fail(f"Backend() server weight {weight!r} must be 0..256")
    options = raw.get("options", ())
    return ServerDesc(str(raw.get("name", "")), str(raw.get("address", "")), port, weight,
                      tuple(str(o) for o in options))


def check_file_path(path: str) -> None:
    """A file path of the render: plain words between slashes (raises escaping.Unsafe otherwise)."""
    for part in path.split("/"):
        escaping.ident(part, what="file name")


def profile_name(lines: Sequence[str]) -> str:
    return _profile_name(tuple(lines))


@functools.lru_cache(maxsize=4096)
def _profile_name(lines: tuple[str, ...]) -> str:
    """Remembered: most backends of a render share a few profiles."""
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]
    return f"haptic-be-{digest}"


class RecorderMemo:
    """What Recorders sharing a source-map marker table may reuse: map entries already checked, and
    Backend() calls already made (same arguments, same text and record). Shared between threads: only
    whole values are stored, never changed."""

    def __init__(self) -> None:
        self.entries: set[str] = set()
        self.backends: dict[BackendKey, tuple[str, BackendDesc, ProfileDesc]] = {}

    def trim(self, entries: int, backends: int) -> None:
        """Forget everything once it holds far more than one render uses (old entries, old servers)."""
        if len(self.entries) > 2 * entries + 100_000:
            self.entries = set()
        if len(self.backends) > 2 * backends + 1_000:
            self.backends = {}


class BackendKey:
    """Backend() arguments as a memo key, hashed once: a key is looked up and then stored, and hashing it
    hashes every server record (in Python)."""

    __slots__ = ("_hash", "value")

    def __init__(self, value: tuple[Any, ...]) -> None:
        self._hash = hash(value)  # TypeError when some value is not hashable
        self.value = value

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BackendKey) and self._hash == other._hash and self.value == other.value


def _backend_key(spec: Mapping[str, Any]) -> BackendKey | None:
    """Backend() arguments as a hashable key, or None when some value is not a plain string/list/record
    (then the call is not remembered and fails or succeeds on its own)."""
    key: list[Any] = []
    for k, value in spec.items():
        if type(value) is list:
            value = tuple(value)
        # the type too, unless a string: 1, 1.0 and True are equal keys but not equal Backend() text
        key.append((k, value) if type(value) is str else (k, type(value), value))
    try:
        return BackendKey(tuple(key))
    except TypeError:
        return None


_PRINTABLE = bytes(range(0x20, 0x7F)) + b"\n"  # what map lines may hold (joined by line breaks)


class PlainLines(list[str]):
    """Map entries their maker proved plain map lines (``escaping.map_entry``'s fast case) without
    source-map markers, each one once: RegisterMap takes them without checking each line, and an
    ordered map registered from them alone is written without de-duplicating. The 100-slot weight map
    (``HttpModel.map_entries``) is most of a large render's map lines; its lines are made of a few
    checked words. A list like any other to a template; a copy or a sum of it is a plain list again.
    ``text``: when set, the lines joined by line breaks with one after the last, made with them (a map
    registered from these lines alone is then written without joining 600,000 lines again)."""

    __slots__ = ("text",)

    def __init__(self, lines: Iterable[str] = (), text: str | None = None) -> None:
        super().__init__(lines)
        self.text = text


def _plain_entries(entries: list[Any], sources: SourceMap) -> bool:
    """Whether every entry, its markers stripped, is a plain map line (``escaping.map_entry``'s fast
    case), found with one pass over the joined text for the characters and a few string tests per
    entry, instead of a regex match per entry (the 100-slot weight maps hold most entries). False: some
    entry needs the per-entry check, which explains it."""
    try:
        joined = "\n".join(entries)
    except TypeError:  # not all strings
        return False
    if joined.count("\n") != len(entries) - 1:
        return not entries  # an entry holds a line break (or there are none)
    clean = sources.without_markers(joined)
    if not clean.isascii() or clean.encode().translate(None, _PRINTABLE):
        return False  # a character outside printable ASCII
    # each line not empty, not starting with '#' or a space, not ending with a space, and (no two spaces
    # anywhere, so) one space at most between key and value: _PLAIN_ENTRY of every line, asked of the
    # joined lines at once (a line starts the text or follows a line break, and ends one or the text)
    return not (not clean or clean[0] in "# \n" or clean[-1] in " \n" or "\n\n" in clean or "\n#" in clean
                or "\n " in clean or " \n" in clean or "  " in clean)


class Recorder:
    """The state behind the helpers for one render: backends, profiles, maps, files."""

    def __init__(self, *, base_lines: Sequence[str], sources: SourceMap,
                 haproxy_version: tuple[int, ...] = (2, 8), memo: RecorderMemo | None = None,
                 previous: Description | None = None) -> None:
        self._base = tuple(base_lines)
        # servers the data plane runs now, per backend: new servers take their slots (``slots``)
        self._slots = {b.name: b.servers for b in previous.backends} if previous is not None else {}
        self._sources = sources
        self._version = haproxy_version
        self._memo = memo if memo is not None else RecorderMemo()
        self.backends: dict[str, BackendDesc] = {}
        self.profiles: dict[str, ProfileDesc] = {}
        self.maps: dict[str, tuple[bool, list[str]]] = {}
        self.files: dict[str, tuple[Literal["cert", "ca", "other"], bytes]] = {}
        # maps registered only from PlainLines (distinct, plain, unmarked: the text's lines are them)
        self._distinct: set[str] = set()
        self._joined: dict[str, str] = {}  # such maps' texts made with their one PlainLines (``text``)
        self._texts: dict[str, tuple[str, list[str]]] = {}  # such maps' texts, and the lines they hold
        # the texts ``map_files`` wrote without their markers, where it stripped them to sort the lines
        self.clean_texts: dict[str, str] = {}

    # ------------------------------------------------------------ Backend()

    def backend(self, spec: Mapping[str, Any]) -> str:
        if not isinstance(spec, Mapping):
            raise _fail("Backend() takes one mapping")
        name, servers = spec.get("name"), spec.get("servers")
        running = self._slots.get(name) if isinstance(name, str) else None
        if running and isinstance(servers, Sequence) and not isinstance(servers, str):
            spec = {**spec, "servers": slots.assign([_server(s) for s in servers], running)}
        key = _backend_key(spec)
        known = self._memo.backends.get(key) if key is not None else None
        if known is not None:
            text, desc, profile = known
            if desc.name in self.backends:
                raise _fail(f"Backend() called twice for {desc.name!r}")
            self.profiles.setdefault(profile.name, profile)
            self.backends[desc.name] = desc
            return text
        text = self._backend(spec)
        if key is not None:
            desc = self.backends[str(spec["name"])]
            self._memo.backends[key] = (text, desc, self.profiles[desc.profile])
        return text

    def _backend(self, spec: Mapping[str, Any]) -> str:
        unknown = sorted(set(spec) - BACKEND_KEYS) if not BACKEND_KEYS.issuperset(spec) else ()
        if unknown:
            raise _fail(f"Backend() got unknown key {unknown[0]!r}; allowed: {', '.join(sorted(BACKEND_KEYS))}")
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise _fail("Backend() needs a name")
        escaping.ident(name, what="backend name")
        if name in self.backends:
            raise _fail(f"Backend() called twice for {name!r}")
        mode = str(spec.get("mode") or "http")
        if mode not in ("http", "tcp"):
            raise _fail(f"Backend() mode must be http or tcp, not {mode!r}")
        balance = escaping.check(str(spec.get("balance") or "roundrobin"), key=False)
        hash_type = escaping.check(str(spec.get("hashType") or ""), key=False)
        default_server = escaping.check(str(spec.get("defaultServer") or ""), key=False)
        guid = str(spec.get("guid") or "")
        if guid:
            escaping.ident(guid, what="guid")
        body = _lines(spec.get("body"), "body")
        comments = _lines(spec.get("comments"), "comments")
        # the record holds what haproxy.cfg will say: no source-map markers (their numbers depend on the
        # render, and a description is compared with the next render's)
        strip_line = self._sources.strip_line
        clean_body = tuple([strip_line(line)[0] for line in body]) if body else ()
        clean_comments = tuple([strip_line(line)[0] for line in comments]) if comments else ()
        for line in (*clean_body, *clean_comments):
            escaping.check(line, key=False, what="backend line")
        servers = tuple(_server(s) for s in (spec.get("servers") or ()))
        profile_lines = (*self._base, f"mode {mode}", *_lines(spec.get("profile"), "profile"))
        if default_server:
            profile_lines = (*profile_lines, f"default-server {default_server}")
        pname = profile_name(profile_lines)
        if pname not in self.profiles:  # most backends share a profile: no record made to be dropped
            self.profiles[pname] = ProfileDesc(pname, profile_lines)
        raw_shape = spec.get("shape") or "dynamic"
        if raw_shape not in ("dynamic", "structural"):
            raise _fail(f"Backend() shape must be dynamic or structural, not {raw_shape!r}")
        shape: Literal["dynamic", "structural"] = "structural" if raw_shape == "structural" else "dynamic"
        reason = str(spec.get("shapeReason") or "")
        if body:
            shape, reason = "structural", reason or "non-empty body"
        self.backends[name] = BackendDesc(
            name=name, mode=mode, balance=balance, hash_type=hash_type, profile=pname, body=clean_body,
            servers=servers, default_server=default_server, guid=guid, comments=clean_comments, shape=shape,
            shape_reason=reason)
        out = [f"backend {name} from {pname}"]
        out += [f"    # {c}" for c in comments]
        out.append(f"    mode {mode}")
        out.append(f"    balance {balance}")
        if hash_type:
            out.append(f"    hash-type {hash_type}")
        if guid and self._version >= (3, 0):
            out.append(f"    guid {guid}")
        out += [f"    {line}" for line in body]
        check, address = escaping.check, escaping.server_address_and_port
        for s in servers:
            escaping.ident(s.name, what="server name")
            opts = "".join([f" {check(o, key=True, what='server option')}" for o in s.options]) \
                if s.options else ""
            out.append(f"    server {s.name} {address(s.address, s.port)} weight {s.weight}{opts}")
        return "\n".join(out) + "\n"

    # ------------------------------------------------------------ RegisterMap()

    def register_map(self, name: str, entries: Sequence[str] = (), options: Mapping[str, Any] | None = None) -> str:
        escaping.ident(name, what="map name")
        opts = dict(options or {})
        unknown = sorted(set(opts) - MAP_OPTION_KEYS)
        if unknown:
            raise _fail(f"RegisterMap() got unknown option {unknown[0]!r}")
        ordered = bool(opts.get("ordered", True))
        path = f"maps/{name}"
        known = self.maps.get(path)
        if known is not None and known[0] != ordered:
            raise _fail(f"RegisterMap({name!r}) registered both ordered and unordered")
        bucket = self.maps.setdefault(path, (ordered, []))[1]
        self._joined.pop(path, None)  # only a map of one PlainLines keeps their text
        if type(entries) is PlainLines:
            if not bucket:
                self._distinct.add(path)
                if entries and entries.text is not None:
                    self._joined[path] = entries.text
            else:
                self._distinct.discard(path)
            bucket.extend(entries)
            return path
        self._distinct.discard(path)
        items = list(entries)
        if _plain_entries(items, self._sources):
            bucket.extend(items)
            return path
        checked = self._memo.entries
        for entry in items:
            if entry not in checked:
                if not isinstance(entry, str):
                    raise _fail(f"RegisterMap({name!r}) entries must be strings")
                clean, origin = self._sources.strip_line(entry)
                escaping.map_entry(clean)
                if origin is not None:  # a marked entry: a cached route's, the same string next render
                    checked.add(entry)
            bucket.append(entry)
        return path

    def add_file(self, path: str, content: bytes, kind: Literal["cert", "ca", "other"] = "other") -> str:
        check_file_path(path)
        self.files[path] = (kind, content)
        return path

    def attempt(self, write: Callable[[Mapping[str, Any]], str | None], context: Mapping[str, Any]) -> str | None:
        """``write(context)``, or None with the backends, profiles and map entries it recorded undone when
        it raised (a fast snippet, which records nothing else, gives way to its template, whose error
        names the template line). A snippet marked ``records_nothing`` (``fastsnippets``) has nothing to
        undo: no snapshot is taken for it."""
        if getattr(write, "records_nothing", False):
            try:
                return write(context)
            except Exception:  # the template runs instead and reports it
                return None
        backends, profiles = dict(self.backends), dict(self.profiles)
        # map entries are only ever appended: their counts are enough to take back what was added
        sizes = {path: len(bucket) for path, (_, bucket) in self.maps.items()}
        distinct, joined = set(self._distinct), dict(self._joined)
        try:
            return write(context)
        except Exception:  # any failure: the template runs instead and reports it
            self.backends.clear()
            self.backends.update(backends)
            self.profiles.clear()
            self.profiles.update(profiles)
            for path in [path for path in self.maps if path not in sizes]:
                del self.maps[path]
            for path, size in sizes.items():
                del self.maps[path][1][size:]
            self._distinct, self._joined = distinct, joined
            return None

    # ------------------------------------------------------------ output

    def profile_sections(self) -> str:
        out: list[str] = []
        for name in sorted(self.profiles):
            out.append(f"defaults {name}")
            out += [f"    {line}" for line in self.profiles[name].lines]
            out.append("")
        return "\n".join(out)

    def map_files(self) -> dict[str, str]:
        """Map file texts: unordered maps sorted and de-duplicated, ordered ones as registered."""
        out: dict[str, str] = {}
        self.clean_texts = {}
        for path, (ordered, entries) in sorted(self.maps.items()):
            if ordered and path in self._distinct:
                lines = entries  # distinct already
                joined = self._joined.get(path)
                out[path] = text = joined if joined is not None else "\n".join(lines) + "\n" if lines else ""
                self._texts[path] = (text, lines)
                continue
            if ordered:
                lines = list(dict.fromkeys(entries))
            else:
                # first occurrence order, then a stable sort: entries that differ only in their origin
                # marker keep the order they were registered in, whatever numbers the markers got
                unique = list(dict.fromkeys(entries))
                clean = self._sources.strip_lines(unique)
                order = sorted(range(len(unique)), key=clean.__getitem__)
                lines = [unique[i] for i in order]
                if clean is not unique and lines:  # markers stripped: the written text without them
                    self.clean_texts[path] = "\n".join([clean[i] for i in order]) + "\n"
            out[path] = "\n".join(lines) + "\n" if lines else ""
        return out

    def _lines_of(self, path: str, text: str) -> tuple[str, ...]:
        """``text.splitlines()``: the lines it was joined from when it is a text ``map_files`` made of
        PlainLines (printable ASCII, none of the characters splitlines breaks at)."""
        known = self._texts.get(path)
        if known is not None and known[0] is text:
            return tuple(known[1])
        return tuple(text.splitlines())

    def description(self, map_texts: Mapping[str, str], *, frame: str = "") -> Description:
        maps = tuple(MapDesc(path, self.maps[path][0], self._lines_of(path, t))
                     for path, t in sorted(map_texts.items()))
        files = tuple(FileDesc(p, kind, hashlib.sha256(data).hexdigest())
                      for p, (kind, data) in sorted(self.files.items()))
        return Description(
            backends=tuple(self.backends[n] for n in sorted(self.backends)),
            profiles=tuple(self.profiles[n] for n in sorted(self.profiles)),
            maps=maps, files=files, frame=frame)
