"""The input folder's files: what may be read, and a reason for everything that may not.

Only regular files whose real path lies inside the input folder are read. A symlink out of
the folder, a symlink loop or a broken one, a symlink to a folder (never followed: no loops,
no second copy of a tree), a FIFO or device, a hidden file and a hidden folder (one entry for
the folder, not one per file in it) each become an entry with a reason that names no
absolute path. Folders docgraph writes itself (the output folder, $DAGSTER_HOME) are skipped
silently when they lie inside the input folder, so a run never reads its own outputs and the
folder sensor never triggers itself.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

OUTSIDE = "symlink to a file outside the input folder"
FOLDER_LINK = "symlink to a folder (not followed)"
LOOP = "symlink loop"
BROKEN = "broken symlink (its target does not exist)"
SPECIAL = "not a regular file"
HIDDEN_FILE = "hidden file (not read)"
HIDDEN_FOLDER = "hidden folder (not read)"
INTO_OWN = "symlink into a folder docgraph writes (not read)"
# The publications manifest (pipeline.ingest.publications) at the input folder's top level:
# it describes documents, it is not one.
MANIFEST_NAMES = ("publications.json", "publications.jsonl")


class InputFolderError(ValueError):
    """The input folder is missing, not a folder or empty: the run stops before writing."""


@dataclass(frozen=True)
class Entry:
    """One name under the input folder: `path` (its real path) to read, or the reason not to."""

    rel: str  # posix path relative to the input folder
    path: Path | None = None
    reason: str = ""
    hidden: bool = False
    # (size, mtime_ns, mtime) as the walk found them: every step of the run judges the file
    # by this one stat (a 40k-file run stat'ed each file four times, ~1 s)
    stat: tuple[int, int, float] | None = None

    def found(self) -> tuple[int, int, float] | None:
        """The file's (size, mtime_ns, mtime): the walk's, else stat'ed now; None when it
        cannot be (gone since the walk) or the entry is no file to read."""
        if self.stat is not None or self.path is None:
            return self.stat
        try:
            return _stat_of(self.path.stat())
        except OSError:
            return None


def _stat_of(st: os.stat_result) -> tuple[int, int, float]:
    return st.st_size, st.st_mtime_ns, st.st_mtime


def own_folders(output_dir: str | Path | None) -> tuple[str, ...]:
    """Folders docgraph writes that must never be read as input: the output folder, and
    $DAGSTER_HOME (run storage) when set."""
    return tuple(str(p) for p in (output_dir, os.environ.get("DAGSTER_HOME")) if p)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _skipped(real_root: Path, exclude: Iterable[str | Path]) -> frozenset[Path]:
    """Real paths of the excluded folders that lie strictly inside the input folder (one that
    holds the input folder, like DAGSTER_HOME=$PWD, excludes nothing)."""
    reals = (Path(os.path.realpath(e)) for e in exclude if e)
    return frozenset(p for p in reals if p != real_root and _within(p, real_root))


def check_input_folder(input_dir: str | Path, exclude: Iterable[str | Path] = ()) -> Path:
    """The input folder as a Path, or InputFolderError when it is missing, a file or holds no
    visible entry: a typo must not index nothing (or the sample) over a good index."""
    root = Path(input_dir)
    if not root.exists():
        raise InputFolderError(f"input folder {root} does not exist")
    if not root.is_dir():
        raise InputFolderError(f"input folder {root} is not a folder")
    if not _has_visible_entry(root, _skipped(Path(os.path.realpath(root)), exclude)):
        raise InputFolderError(
            f"input folder {root} holds no files to index (hidden ones and the output folder "
            "are skipped)"
        )
    return root


def _has_visible_entry(root: Path, skip: frozenset[Path]) -> bool:
    """Whether any non-hidden name outside the skipped folders lies under root (stops at the
    first; a symlink to a folder counts: it gets a rejected row)."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        manifest = MANIFEST_NAMES if here == root else ()  # no document: describes them
        if any(not name.startswith(".") and name not in manifest for name in filenames):
            return True
        dirnames[:] = [
            d
            for d in dirnames
            if not d.startswith(".") and Path(os.path.realpath(here / d)) not in skip
        ]
        if any((here / d).is_symlink() for d in dirnames):
            return True
    return False


def walk_input(input_dir: str | Path, exclude: Iterable[str | Path] = ()) -> list[Entry]:
    """Every name under the input folder as an Entry, sorted by relative path.

    One `os.scandir` per folder: a plain file's type comes with its folder's listing and its
    real path is its folder's plus its name, so only symlinks cost system calls of their own
    (the walk runs several times a run and on every sensor poll: 10,000 files took 0.67 s
    with a realpath and stats per file)."""
    root = Path(input_dir)
    real_root = Path(os.path.realpath(root))
    skip = _skipped(real_root, exclude)
    entries: list[Entry] = []
    folders = [("", real_root)]  # (relative posix path, real path) of folders to list
    while folders:
        rel_dir, real_dir = folders.pop()
        prefix = f"{rel_dir}/" if rel_dir else ""
        try:
            with os.scandir(root / rel_dir if rel_dir else root) as listing:
                items = list(listing)
        except OSError as err:
            entries.append(Entry(rel_dir or ".", reason=f"folder not readable ({err.strerror})"))
            continue
        for item in items:
            rel = prefix + item.name
            try:
                is_link, is_dir = item.is_symlink(), item.is_dir(follow_symlinks=False)
            except OSError:
                is_link = is_dir = False
            if is_dir or (is_link and os.path.isdir(item.path)):
                entry = _folder_entry(root, root / rel, skip)
                if entry is None:
                    folders.append((rel, real_dir / item.name))
                elif entry.reason:
                    entries.append(entry)
            elif not rel_dir and item.name in MANIFEST_NAMES:
                continue  # the publications manifest describes documents, it is none
            elif is_link:
                entries.append(_file_entry(root, real_root, root / rel, skip))
            elif item.name.startswith("."):
                entries.append(Entry(rel, reason=HIDDEN_FILE, hidden=True))
            elif item.is_file(follow_symlinks=False):
                entries.append(_plain_file(rel, real_dir / item.name, item))
            else:
                entries.append(Entry(rel, reason=SPECIAL))
    return sorted(entries, key=lambda e: e.rel)


def _plain_file(rel: str, real: Path, item: os.DirEntry) -> Entry:
    try:
        return Entry(rel, path=real, stat=_stat_of(item.stat(follow_symlinks=False)))
    except OSError:  # gone while listed: judged again when read
        return Entry(rel, path=real)


# The walks this process saved, by file: steps of a run in this process (the in-process
# executor's) take the entries as they are; reading 40k of them back took ~0.5 s, most of
# it making their Paths. Steps in other processes read the file.
_SAVED: dict[str, list[Entry]] = {}


def write_listing(path: str | Path, entries: Iterable[Entry], to_file: bool = True) -> None:
    """Save a walk for the steps of the same run to read with `read_listing`, so a run
    walks its input folder once: in this process, and in the file `path` when `to_file`
    (for steps in other processes). Column by column, one JSON document: a line per entry
    took 0.3 s to write at 40k files. `forget_listing` when the run is over."""
    rows = list(entries)
    _SAVED[str(path)] = rows
    if not to_file:
        return
    columns = {
        "rel": [e.rel for e in rows],
        "path": [e.path and str(e.path) for e in rows],
        "reason": [e.reason for e in rows],
        "hidden": [e.hidden for e in rows],
        "stat": [e.stat for e in rows],
    }
    Path(path).write_text(json.dumps(columns), encoding="utf-8")


def read_listing(path: str | Path) -> list[Entry]:
    """The walk `write_listing` saved."""
    if (saved := _SAVED.get(str(path))) is not None:
        return list(saved)
    c = json.loads(Path(path).read_text(encoding="utf-8"))
    return [
        Entry(rel, where and Path(where), reason, hidden, tuple(found) if found else None)
        for rel, where, reason, hidden, found in zip(
            c["rel"], c["path"], c["reason"], c["hidden"], c["stat"], strict=True
        )
    ]


def forget_listing(path: str | Path) -> None:
    """Remove a saved walk, its file and this process's entries."""
    _SAVED.pop(str(path), None)
    Path(path).unlink(missing_ok=True)


def manifest_entries(input_dir: str | Path) -> list[Entry]:
    """The publications manifest files present at the top of the input folder, each with its
    real path to read or the reason it may not be (a symlink out of the folder, ...)."""
    root = Path(input_dir)
    real_root = Path(os.path.realpath(root))
    found = (root / name for name in MANIFEST_NAMES)
    return [_file_entry(root, real_root, p, frozenset()) for p in found if os.path.lexists(p)]


def _folder_entry(root: Path, path: Path, skip: frozenset[Path]) -> Entry | None:
    """None to walk into the folder; an Entry with a reason to reject it; an Entry without
    one to skip it silently (a folder docgraph writes)."""
    rel = path.relative_to(root).as_posix()
    if path.name.startswith("."):
        return Entry(rel, reason=HIDDEN_FOLDER, hidden=True)
    if path.is_symlink():
        return Entry(rel, reason=FOLDER_LINK)
    if Path(os.path.realpath(path)) in skip:
        return Entry(rel)
    return None


def _file_entry(root: Path, real_root: Path, path: Path, skip: frozenset[Path]) -> Entry:
    """The file's real path when it may be read, else the reason it may not."""
    rel = path.relative_to(root).as_posix()
    if path.name.startswith("."):
        return Entry(rel, reason=HIDDEN_FILE, hidden=True)
    try:
        real = Path(os.path.realpath(path, strict=True))
        found = real.stat()
        mode = found.st_mode
    except FileNotFoundError:
        return Entry(rel, reason=BROKEN)
    except OSError as exc:
        return Entry(
            rel, reason=LOOP if exc.errno == errno.ELOOP else f"cannot read ({exc.strerror})"
        )
    if not _within(real, real_root):
        return Entry(rel, reason=OUTSIDE)
    if any(_within(real, s) for s in skip):
        return Entry(rel, reason=INTO_OWN)
    if not stat.S_ISREG(mode):
        return Entry(rel, reason=SPECIAL)
    if path.is_symlink():  # the file it names is read under its own path, once
        target = real.relative_to(real_root).as_posix()
        return Entry(rel, reason=f"symlink to {target} (read there)")
    return Entry(rel, path=real, stat=_stat_of(found))


def folder_fingerprint(
    input_dir: str | Path, exclude: Iterable[str | Path] = ()
) -> tuple[str, int]:
    """(hash of every readable file's path, size and mtime and every rejected name, readable
    file count): changes when a file is added, edited or deleted, without reading any content
    — what a sensor polls. Hidden names and the excluded folders do not count, so an editor's
    swap file or the run's own outputs never trigger a run."""
    root = Path(input_dir)
    if not root.is_dir():
        return "", 0
    h = hashlib.sha256()
    n = 0
    for e in [*walk_input(root, exclude), *manifest_entries(root)]:
        if e.hidden:
            continue
        if e.path is None:
            h.update(f"{e.rel}\x1f{e.reason}\n".encode())
            continue
        if (found := e.found()) is None:  # deleted since the walk: the next poll sees it gone
            continue
        h.update(f"{e.rel}\x1f{found[0]}\x1f{found[1]}\n".encode())
        n += 1
    return h.hexdigest()[:32], n
