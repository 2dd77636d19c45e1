"""Drop repeated ``<script>`` entries from every page.

Jupyter Book 1 ends up registering the inline configuration scripts of sphinx-thebe and
sphinx-togglebutton twice, once with filename ``None`` and once with ``""``, so Sphinx's own
de-duplication misses them. In the browser the second copy throws ``SyntaxError:
Identifier 'THEBE_JS_URL' has already been declared``. This keeps the first of each
identical script.
"""


def _dedupe(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        # the same inline script may come twice, once with filename None and once ""
        key = (str(getattr(script, "filename", script) or ""),
               repr(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app):
    app.connect("html-page-context", _dedupe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
