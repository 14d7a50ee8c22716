"""The built documentation has a gallery page with a rendered figure for every
example, thumbnails on the gallery index, and math served from the site itself.

``check_html(html_dir, examples_dir)`` lists what is missing. It runs on the
real build when ``SKLEARN_R2SHAP_DOC_HTML`` names the HTML directory (CI sets
it after ``python -m sphinx ... doc doc/_build/html``; without it that test is
skipped), and on small hand-made sites below, which show that each missing
piece is reported.
"""
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Tags(HTMLParser):
    """The src of every <img> and <script> of a page."""

    def __init__(self):
        super().__init__()
        self.images, self.scripts = [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])
        elif tag == "script" and attrs.get("src"):
            self.scripts.append(attrs["src"])


def _tags(page):
    parser = _Tags()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def _png(html_dir, page, src):
    """Problem with the image ``src`` of ``page``, or None if it is a real PNG."""
    if "://" in src or src.startswith("data:"):
        return f"{page.name}: image {src} is not a file of the site"
    path = (page.parent / src).resolve()
    if not path.is_file():
        return f"{page.name}: image {src} does not exist"
    with open(path, "rb") as handle:
        head = handle.read(len(PNG_MAGIC))
    if head != PNG_MAGIC or path.stat().st_size < 1000:
        return f"{page.name}: image {src} is not a rendered PNG"
    return None


def check_html(html_dir, examples_dir):
    """What is missing from the built site; an empty list when nothing is."""
    html_dir, problems = Path(html_dir), []
    examples = sorted(Path(examples_dir).glob("*.py"))
    if not examples:
        return [f"no examples in {examples_dir}"]
    gallery = html_dir / "auto_examples"
    index = gallery / "index.html"
    if not index.is_file():
        return [f"gallery index {index} missing"]
    thumbs = _tags(index).images
    for script in examples:
        stem = script.stem
        page = gallery / f"{stem}.html"
        if not page.is_file():
            problems.append(f"gallery page {page.name} missing")
            continue
        figures = [src for src in _tags(page).images if f"sphx_glr_{stem}_0" in src]
        if not figures:
            problems.append(f"{page.name}: no figure")
        problems += filter(None, (_png(html_dir, page, src) for src in figures))
        thumb = [src for src in thumbs if f"sphx_glr_{stem}_thumb" in src]
        if not thumb:
            problems.append(f"index.html: no thumbnail for {stem}")
        problems += filter(None, (_png(html_dir, index, src) for src in thumb))
    # math: every page that loads MathJax loads the site's own copy
    math_pages = 0
    for page in sorted(html_dir.rglob("*.html")):
        for src in _tags(page).scripts:
            if "mathjax" not in src.lower():
                continue
            math_pages += 1
            if "://" in src or src.startswith("//"):
                problems.append(f"{page.relative_to(html_dir)}: MathJax from the network ({src})")
            elif not (page.parent / src.split("?")[0]).resolve().is_file():
                problems.append(f"{page.relative_to(html_dir)}: MathJax file {src} missing")
    if math_pages == 0:
        problems.append("no page loads MathJax")
    return problems


@pytest.mark.skipif(not os.environ.get("SKLEARN_R2SHAP_DOC_HTML"),
                    reason="set SKLEARN_R2SHAP_DOC_HTML to the built HTML directory")
def test_built_documentation():
    html_dir = Path(os.environ["SKLEARN_R2SHAP_DOC_HTML"])
    assert html_dir.is_dir(), f"{html_dir} is not a directory"
    assert check_html(html_dir, ROOT / "examples") == []
    assert "DESIGN.md" not in "".join(p.read_text(encoding="utf-8")
                                      for p in html_dir.rglob("*.html"))


# Small hand-made sites: a complete one passes, and each missing piece is reported.

def _site(tmp_path, *, figure=True, thumb=True, png=True, mathjax="_static/mathjax/tex-chtml.js"):
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "demo.py").write_text('"""\nDemo\n====\n"""\n')
    html = tmp_path / "html"
    (html / "auto_examples").mkdir(parents=True)
    (html / "_images").mkdir()
    (html / "_static" / "mathjax").mkdir(parents=True)
    (html / "_static" / "mathjax" / "tex-chtml.js").write_text("// MathJax")
    image = PNG_MAGIC + bytes(2000) if png else b"<svg/>"
    (html / "_images" / "sphx_glr_demo_001.png").write_bytes(image)
    (html / "_images" / "sphx_glr_demo_thumb.png").write_bytes(image)
    img = '<img src="../_images/sphx_glr_demo_001.png">' if figure else ""
    (html / "auto_examples" / "demo.html").write_text(f"<html><body>{img}</body></html>")
    tag = '<img src="../_images/sphx_glr_demo_thumb.png">' if thumb else ""
    (html / "auto_examples" / "index.html").write_text(f"<html><body>{tag}</body></html>")
    (html / "math.html").write_text(f'<html><script src="{mathjax}"></script></html>')
    return html, examples


def test_check_html_accepts_a_complete_site(tmp_path):
    assert check_html(*_site(tmp_path)) == []


@pytest.mark.parametrize("missing, message", [
    (dict(figure=False), "demo.html: no figure"),
    (dict(thumb=False), "no thumbnail for demo"),
    (dict(png=False), "is not a rendered PNG"),
    (dict(mathjax="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"),
     "MathJax from the network"),
    (dict(mathjax="_static/mathjax/missing.js"), "MathJax file"),
])
def test_check_html_reports_what_is_missing(tmp_path, missing, message):
    problems = check_html(*_site(tmp_path, **missing))
    assert any(message in problem for problem in problems), problems


def test_check_html_reports_a_missing_page(tmp_path):
    html, examples = _site(tmp_path)
    (examples / "other.py").write_text('"""\nOther\n=====\n"""\n')
    assert "gallery page other.html missing" in check_html(html, examples)
