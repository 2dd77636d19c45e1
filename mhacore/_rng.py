"""Random-generator plumbing: ``rng`` is an argument, normalised once, never global.

House rule 7 of ``DESIGN.md``: every random function takes ``rng=None | int | Generator``;
replicates get independent children by ``spawn``; torch code gets a local
``torch.Generator`` seeded from the numpy one.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from ._validation import check_int

__all__ = ["DEFAULT_SEED", "as_generator", "spawn", "replicate_rng", "torch_generator"]

#: The book's seed: every registered check and report runs from it unless told otherwise.
DEFAULT_SEED = 20260521


def as_generator(rng=None) -> np.random.Generator:
    """Normalise ``rng`` to a :class:`numpy.random.Generator`.

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` draws fresh OS entropy; an int (>= 0) or a ``SeedSequence`` seeds a new
        generator; a ``Generator`` is returned unchanged (shared state, not copied).

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    TypeError
        If ``rng`` is of any other type (``bool`` included).
    ValueError
        If ``rng`` is a negative integer.

    Examples
    --------
    >>> a = as_generator(7).integers(1000, size=3)
    >>> b = as_generator(7).integers(1000, size=3)
    >>> bool((a == b).all())
    True
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"rng must be None, an integer >= 0 or a numpy Generator; got {rng}")
        return np.random.default_rng(int(rng))
    raise TypeError(
        f"rng must be None, an integer >= 0 or a numpy Generator; got {type(rng).__name__}"
    )


def spawn(rng, n_children: int) -> list[np.random.Generator]:
    """Independent child generators for replicates, trees or ants.

    Parameters
    ----------
    rng : None, int or numpy.random.Generator
        Parent, normalised by :func:`as_generator`.
    n_children : int
        Number of children (>= 0).

    Returns
    -------
    list of numpy.random.Generator
        Children that do not depend on how many numbers the parent drew afterwards.

    Raises
    ------
    TypeError, ValueError
        ``n_children`` not an integer >= 0 (``TypeError`` for a non-integer).

    Examples
    --------
    >>> kids = spawn(0, 2)
    >>> len(kids), kids[0].random() != kids[1].random()
    (2, True)
    """
    n_children = check_int(n_children, "n_children", minimum=0)
    return as_generator(rng).spawn(n_children)


def torch_generator(rng=None, device="cpu") -> torch.Generator:
    """A local ``torch.Generator`` on ``device`` seeded from ``rng`` (no global seeding).

    Examples
    --------
    >>> g = torch_generator(3)
    >>> torch.rand(2, generator=g).shape
    torch.Size([2])
    """
    seed = int(as_generator(rng).integers(2**63 - 1))
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def replicate_rng(seed: int, *index: int) -> np.random.Generator:
    """Generator of replicate ``index`` from ``seed`` alone (no rank, no world size).

    Equal to the child reached by ``SeedSequence(seed).spawn`` along ``index``: child
    ``r`` of ``spawn(R)`` for one index, its child ``s`` for ``(r, s)``, and so on.

    Examples
    --------
    >>> kid = np.random.default_rng(np.random.SeedSequence(5).spawn(4)[3])
    >>> bool(replicate_rng(5, 3).random() == kid.random())
    True
    """
    seed = check_int(seed, "seed", minimum=0)
    for i in index:
        check_int(i, "index", minimum=0)
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=tuple(index)))
