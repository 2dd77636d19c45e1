"""The student edition of the site: ``MHACORE_EDITION=student`` removes every solution.

``make book-student`` builds with this variable set. The configuration is otherwise the
site's own (same chapters, same execution settings, so a shared execution cache serves
both builds); this only switches on sphinx-exercise's ``hide_solutions`` and drops what
would carry solutions out another way: the page sources (``_sources``) and the download
button, which offers the chapters with their answer cells.
"""

import os

EDITION_VARIABLE = "MHACORE_EDITION"


def _student_config(app, config):
    if os.environ.get(EDITION_VARIABLE, "") != "student":
        return
    config.hide_solutions = True
    config.html_copy_source = False
    config.html_show_sourcelink = False
    options = dict(config.html_theme_options or {})
    options["use_download_button"] = False
    config.html_theme_options = options
    config.html_title = f"{config.html_title or config.project} (student edition)"


def setup(app):
    app.connect("config-inited", _student_config, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
