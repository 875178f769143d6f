"""The best offline encoder that is installed, in one call: :func:`recommended_encoder`.

- With the ``[e5]`` extra: character n-grams and multilingual-e5-small mixed
  :data:`RECOMMENDED_WEIGHTS`, routes scored by the mean of their :data:`RECOMMENDED_TOP_K` best
  examples. The n-grams catch exact wording (product names, codes, typos shared with an example),
  e5 catches meaning across wording and languages.
- Without it: the character n-grams alone, which need no model and no download.

Which one was chosen is logged (``langgraph_handoff.routing``, INFO) and visible in ``repr``.
The figures behind the choice are in docs/performance.md (Routing quality), from ``bench/routing.py``.
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph_handoff.routing.e5 import E5Encoder, e5_available
from langgraph_handoff.routing.encoders import CharNgramEncoder, CombinedEncoder

__all__ = ["RECOMMENDED_TOP_K", "RECOMMENDED_WEIGHTS", "recommended_encoder"]

logger = logging.getLogger("langgraph_handoff.routing")

# (char n-grams, e5), chosen on the first batch of bench/routing_data.py
RECOMMENDED_WEIGHTS = (0.35, 0.65)
# the mean of a route's 8 best examples: chosen on the first batch (with per-script thresholds,
# in-scope / off-topic 81.7 / 94.0 % against 78.8 / 87.0 for the top 3) and held on the second
# (80.8 / 51.7 against 80.2 / 48.3). A route with 8 examples or fewer is scored by the mean of
# all of them, which measured no worse than its top 3 on single-language routers (bench notes)
RECOMMENDED_TOP_K = 8


def recommended_encoder(*, num_threads: int | None = 1) -> Any:
    """The char + e5 mix when ``[e5]`` is installed, else the char n-grams; logs which.

    Pass it to ``SemanticRouter(routes, encoder=recommended_encoder())``; the router picks up
    its preferred top-k scoring unless you pass ``top_k``.

    >>> enc = recommended_encoder()
    >>> type(enc).__name__ in ("CombinedEncoder", "CharNgramEncoder")
    True
    """
    if e5_available():
        enc = CombinedEncoder(
            [CharNgramEncoder(), E5Encoder(num_threads=num_threads)], list(RECOMMENDED_WEIGHTS), top_k=RECOMMENDED_TOP_K
        )
        logger.info(
            "routing encoder: %.2f char n-grams + %.2f multilingual-e5-small, top-%d scoring ([e5] is installed)",
            *RECOMMENDED_WEIGHTS,
            RECOMMENDED_TOP_K,
        )
        return enc
    logger.info(
        "routing encoder: char n-grams (install 'langgraph-handoff[e5]' for the multilingual e5 mix, "
        "which understands meaning rather than spelling)"
    )
    return CharNgramEncoder()


def describe_encoder(encoder: Any) -> str:
    """A short human name for an encoder, e.g. for a demo's output.

    >>> describe_encoder(CharNgramEncoder())
    'char n-grams'
    """
    if isinstance(encoder, CombinedEncoder):
        parts = " + ".join(
            f"{w:.2f} {describe_encoder(p)}" for w, p in zip(encoder.weights, encoder.parts, strict=True)
        )
        return parts + (f", top-{encoder.top_k}" if encoder.top_k and encoder.top_k > 1 else "")
    if isinstance(encoder, CharNgramEncoder):
        return "char n-grams"
    if isinstance(encoder, E5Encoder):
        return "multilingual-e5-small"
    return type(encoder).__name__
