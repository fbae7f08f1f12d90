"""Names every CTR module shares: the path type and the default number of text lines per chunk."""
from __future__ import annotations

import os
from typing import Union

PathLike = Union[str, os.PathLike]

#: Lines of text held at once by the streaming readers.
_DEFAULT_CHUNK = 1 << 16
