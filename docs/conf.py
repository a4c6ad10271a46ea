"""Sphinx configuration of the spatialhash site: ``./dev docs`` builds it with warnings as errors.

The pages are the Markdown files beside this one (read by myst-parser), the API reference is
generated from the docstrings (autosummary, numpydoc), and the gallery runs the scripts of
``examples/gallery/`` during the build (sphinx-gallery), so an example that breaks fails it.
"""

from __future__ import annotations

import html
import re

import spatialhash

project = "spatialhash"
author = "The spatialhash developers"
copyright = "2026, The spatialhash developers"
release = spatialhash.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_parser",
    "sphinx_design",  # the landing page's grid and cards
    "sphinx_gallery.gen_gallery",
]
# No sphinx.ext.intersphinx: its inventories (numpy, scipy) are fetched from the internet at
# build time, which CI may not have; a failed fetch is a warning, and warnings are errors.

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
# Copied into the site as they are: the benchmark data the gallery draws
# (_static/benchmarks/scaling.json, written by benchmarks/bench_scaling.py), for download.
html_static_path = ["_static"]
exclude_patterns = ["_build"]

# Single backquotes in docstrings (`Grid`, `Pairs.to_scipy`) link to the object they name;
# a name that is no documented object renders as code, with no warning.
default_role = "py:obj"

# -- the API reference: autosummary stubs, numpydoc sections --------------------------------
autosummary_generate = True
autodoc_typehints = "none"  # the numpydoc type lines say it, with shapes and dtypes
# The class template (_templates/autosummary/class.rst) lists methods and attributes with a
# page each; numpydoc's own member tables would list them a second time.
numpydoc_show_class_members = False


def _package_base_members() -> list[str]:
    """The public members the public classes take from base classes of this package (the
    parts of `Grid` kept in modules of their own): the template lists them as the class's
    own, and leaves out only what comes from Python's and NumPy's classes."""
    names = set()
    for public in vars(spatialhash).values():
        if not isinstance(public, type):
            continue
        for base in public.__mro__[1:]:
            if base.__module__.startswith("spatialhash."):
                names.update(name for name in vars(base) if not name.startswith("_"))
    return sorted(names)


autosummary_context = {"package_base_members": _package_base_members()}
# Docstrings are checked by the build's warnings, not by numpydoc's style validation.
numpydoc_validation_checks: set[str] = set()

# -- the Markdown pages ----------------------------------------------------------------------
myst_enable_extensions = ["colon_fence"]
# Anchors for headings of levels 1 to 3, so that `design.md#the-compile-cache` resolves.
myst_heading_anchors = 3

# -- the gallery -----------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples/gallery",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",  # every example runs, and one that raises fails the build
    "within_subsection_order": "FileNameSortKey",
}

# -- HTML ------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"spatialhash {release}"
html_theme_options = {"show_toc_level": 2}
html_show_sourcelink = False


# -- links from the pages to the repository's files -------------------------------------------
# The Markdown pages link to source files as the repository shows them
# (`[src/spatialhash/grid/](../src/spatialhash/grid/)`): paths out of docs/, which are no pages
# of the site. myst would copy a linked file into the site as a download and warns on a
# linked folder. Here such a link becomes its text (the path, as code) or, once the
# repository has a public address, a link to the file there: set SOURCE_URL to the prefix of
# its file URLs (ending in "/", e.g. ".../blob/main/").
SOURCE_URL: str | None = None
_REPOSITORY_LINK = re.compile(r"\[([^\]]*)\]\(\.\./([^)\s]*)\)")


def _repository_links(app, docname: str, source: list[str]) -> None:
    if not str(app.env.doc2path(docname)).endswith(".md"):
        return
    if SOURCE_URL is None:
        source[0] = _REPOSITORY_LINK.sub(r"\1", source[0])
    else:
        source[0] = _REPOSITORY_LINK.sub(rf"[\1]({SOURCE_URL}\2)", source[0])


# -- the gallery's thumbnails: alt text ---------------------------------------------------------
# sphinx-gallery writes each thumbnail of auto_examples/index.rst with an empty ``:alt:``; a
# screen reader then says nothing of it. Each gets the title of its example, which the
# thumbnail's caption shows beside it.
_THUMBNAIL = re.compile(
    r"(?P<image>\.\. image:: /\S+\n[ \t]+):alt:[ \t]*\n"
    r'(?P<between>(?:(?!\.\. image::).*\n)*?.*sphx-glr-thumbnail-title">(?P<title>.*?)</div>)')


def _thumbnail_alt_text(app, docname: str, source: list[str]) -> None:
    if "sphx-glr-thumbcontainer" not in source[0]:
        return

    def alt(match: re.Match) -> str:
        title = " ".join(html.unescape(match["title"]).split())
        return f"{match['image']}:alt: {title}\n{match['between']}"

    source[0] = _THUMBNAIL.sub(alt, source[0])


# -- links from the docstrings to the pages ---------------------------------------------------
# Docstrings name a page as its file (``docs/design.md``), readable in `help()` and in an
# editor; on the site that name becomes a link to the page. A package's design note
# (`spatialhash.dynamic`) needs nothing here: single backquotes link to it, since
# design-notes.rst documents the packages.
_PAGE_FILE = re.compile(r"(``)?docs/([a-z][a-z0-9-]*)\.md(#[a-z0-9-]+)?(?(1)``)")


def _page_links(app, what: str, name: str, obj, options, lines: list[str]) -> None:
    lines[:] = [_PAGE_FILE.sub(r":doc:`/\2`", line) for line in lines]


# -- the class pages' attribute tables ---------------------------------------------------------
def _skip_plain_attributes(app, what: str, name: str, obj, skip: bool, options) -> bool | None:
    """Leave plain attributes (the result types' dataclass fields) out of the autosummary
    tables of a class page: numpydoc shows them with their descriptions from the class
    docstring's Attributes section, and a table would list them again with no text.
    Properties keep their table and their page."""
    return True if what == "attribute" else None


def setup(app):
    app.connect("source-read", _repository_links)
    app.connect("source-read", _thumbnail_alt_text)
    app.connect("autodoc-process-docstring", _page_links)
    app.connect("autodoc-skip-member", _skip_plain_attributes)
