"""The editions wing: how the book reaches its readers, students and instructors.

These modules read the book's MyST sources and the science wing's results and write
editions; nothing in the science wing imports them. Imports run one way, downwards::

    teach            python -m mhacore teach KIND: reader, student, instructor, nbgrader
      ↓
    answer_key, grading, slides    the instructor pack, the nbgrader course, the decks
      ↓
    reader           the one MyST -> notebook converter and the book's labels
      ↓
    references, outdir, common     citations; folders teach owns; tags, stub, assets

The self-checks students call (:mod:`mhacore.exercises`) stay in the package's top level,
where the chapters import them.
"""
