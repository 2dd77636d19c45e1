"""The editions wing: how the book reaches its readers, students and instructors.

These modules read the book's MyST sources and the science wing's results and write
editions; nothing in the science wing imports them. Imports run one way, downwards::

    teach            python -m mhacore teach KIND: reader, student, instructor, nbgrader
      ↓
    answer_key, grading     the instructor pack's answer key, the nbgrader course
      ↓                     (slides, the lecture decks, sits here too: the site's build
      ↓                     calls it, book/_ext/course_slides.py)
    reader           the one MyST -> notebook converter and the book's labels
      ↓
    references, outdir, common     citations; folders teach owns; tags, stub, assets

Only ``teach`` reaches into the science wing's command line: ``python -m mhacore teach``
imports this wing inside that subcommand, so ``doctor``, ``check`` and ``sweep`` never load
it.

The self-checks students call (:mod:`mhacore.exercises`) stay in the package's top level,
where the chapters import them.
"""
