"""The chi-square quantiles and tail probabilities the diagnosis tests use, from ``scipy.special``.

``scipy.stats`` builds every distribution object on import (about half a CPU second, more than a
small calibration's rollouts); the diagnosis needs three functions of two distributions, which
``scipy.special`` computes directly, as ``scipy.stats`` itself does:

- :func:`chi2_ppf`: ``scipy.stats.chi2.ppf(p, df)`` is ``2 * gammaincinv(df / 2, p)`` (bit for bit);
- :func:`chi2_sf`: ``scipy.stats.chi2.sf(x, df)`` is ``chdtrc(df, x)`` (bit for bit);
- :func:`ncx2_sf_1`: the non-central chi-square with one degree of freedom is the square of a
  normal variable of mean ``sqrt(nc)`` and unit variance, so its tail is
  ``P(|Z + sqrt(nc)| > sqrt(x)) = Phi(-sqrt(x) - sqrt(nc)) + Phi(sqrt(nc) - sqrt(x))``
  (Johnson, Kotz & Balakrishnan, *Continuous Univariate Distributions* vol. 2, ch. 29); it agrees
  with ``scipy.stats.ncx2.sf(x, 1, nc)`` to the last digits.
"""

from __future__ import annotations

import math

__all__ = ["chi2_ppf", "chi2_sf", "ncx2_sf_1", "norm_ppf"]


def chi2_ppf(p: float, df: float) -> float:
    """The ``p`` quantile of the chi-square distribution with ``df`` degrees of freedom (``p`` in [0, 1])."""
    from scipy.special import gammaincinv

    return float(2.0 * gammaincinv(0.5 * df, p))


def norm_ppf(p: float) -> float:
    """The ``p`` quantile of the standard normal distribution: ``scipy.stats.norm.ppf(p)`` is
    ``scipy.special.ndtri(p)`` (bit for bit)."""
    from scipy.special import ndtri

    return float(ndtri(p))


def chi2_sf(x: float, df: float) -> float:
    """``P(X > x)`` for X chi-square with ``df`` degrees of freedom."""
    from scipy.special import chdtrc

    return float(chdtrc(df, x))


def ncx2_sf_1(x: float, nc: float) -> float:
    """``P(X > x)`` for X non-central chi-square with one degree of freedom and non-centrality ``nc`` >= 0
    (module docstring); NaN for a NaN argument."""
    from scipy.special import ndtr

    if not (x == x and nc == nc):
        return math.nan
    a, b = math.sqrt(max(x, 0.0)), math.sqrt(max(nc, 0.0))
    return float(ndtr(-a - b) + ndtr(b - a))
