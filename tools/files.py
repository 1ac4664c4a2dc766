"""Files of users' data, readable by the service's user alone, whatever the umask.

A directory the service creates for its data (the database's, the reports') is made
0700, a file of it 0600: the mode is set after creating, so a umask of 000 (or 002)
gives the same. What already exists is left to its owner's choice here; the database's
own files are tightened at start-up by the storage (`app.core.storage.sqlite.connection`).
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(directory: Path) -> None:
    """Create `directory` and its missing parents, each 0700; an existing one stays as it is."""
    missing: list[Path] = []
    here = directory
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, PRIVATE_DIR)
        except FileExistsError:  # another process made it meanwhile: theirs to set
            continue
        os.chmod(path, PRIVATE_DIR)  # the umask may have taken bits off, never added any


def create_private(path: Path) -> int:
    """A new file at `path`, 0600, open for writing (its descriptor); FileExistsError if
    there is one."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)
    except BaseException:
        os.close(fd)
        raise
    return fd
