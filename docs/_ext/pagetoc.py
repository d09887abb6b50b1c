"""A page's own contents ("on this page") list its objects; the site's navigation lists pages and
sections only.

Sphinx enters every documented function, class and member in its page's table of contents, and
the theme copies the whole site's tree into each page's navigation.  With a page per module and a
source page per module, that copy is quadratic in the number of objects, and was most of the
HTML build's time.  So when the sources have been read, each page's contents are kept whole
(``env.sparsedyn_page_tocs``) and its objects' entries leave the tree the navigation is copied
from.  While a page is written its own entry is whole again: its contents are rendered from it as
Sphinx renders them, and the theme, which reads it to decide whether to show them, finds them."""

from docutils import nodes
from sphinx import addnodes

_READ = set()      # the documents read in this build (the main process; the writers are its forks)


def _object_entry(node):
    # Sphinx marks an object's entry (not a section's) so that it takes no section number
    return isinstance(node, nodes.list_item) and len(node) > 0 and \
        isinstance(node[0], addnodes.compact_paragraph) and node[0].get("skip_section_number", False)


def _without_objects(node):
    """``node`` with its objects' entries removed (and the lists they leave empty); True if any was."""
    removed = False
    for child in list(node.children):
        if _object_entry(child):
            node.remove(child)
            removed = True
        elif isinstance(child, nodes.Element):
            removed = _without_objects(child) or removed
            if isinstance(child, nodes.bullet_list) and not child.children:
                node.remove(child)
    return removed


def _before_read(app, env, docnames):
    _READ.clear()
    _READ.update(docnames)


def _purge(app, env, docname):
    getattr(env, "sparsedyn_page_tocs", {}).pop(docname, None)


def _split(app, env):
    kept = env.__dict__.setdefault("sparsedyn_page_tocs", {})
    for docname in _READ & set(env.tocs):
        whole = env.tocs[docname].deepcopy()
        if _without_objects(env.tocs[docname]):
            kept[docname] = (whole, env.tocs[docname])
        else:
            kept.pop(docname, None)


def _page_toc(app, pagename, templatename, context, doctree):
    whole, _ = getattr(app.env, "sparsedyn_page_tocs", {}).get(pagename, (None, None))
    if whole is None:
        return
    app.env.tocs[pagename] = whole
    toc = whole.deepcopy()
    for ref in toc.findall(nodes.reference):
        ref["refuri"] = ref["anchorname"] or "#"
    context["toc"] = app.builder.render_partial(toc)["fragment"]


def _page_written(app, pagename, templatename, context, doctree):
    _, stripped = getattr(app.env, "sparsedyn_page_tocs", {}).get(pagename, (None, None))
    if stripped is not None:
        app.env.tocs[pagename] = stripped


def setup(app):
    app.connect("env-before-read-docs", _before_read)
    app.connect("env-purge-doc", _purge)
    app.connect("env-updated", _split)
    app.connect("html-page-context", _page_toc, priority=400)        # before the theme reads the page's
    app.connect("html-page-context", _page_written, priority=600)    # contents, and after
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
