"""OSWorld's metrics of documents: Word files (python-docx), PDFs and archives. Registered in
osworld_metrics.METRICS."""

from __future__ import annotations

import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from agent.envs.desktop.osworld_metrics_apps import compare_text_file
from agent.envs.desktop.osworld_metrics_general import ratio
from agent.envs.desktop.osworld_metrics_images import compare_images


# -- documents -----------------------------------------------------------------------------------
def _docx(path: str | None) -> Any:
    from docx import Document
    from docx.opc.exceptions import PackageNotFoundError

    try:
        return Document(path) if path else None
    except PackageNotFoundError as exc:  # not there, or not a .docx: the check scores 0
        raise ValueError(str(exc)) from None


def _paragraph_texts(path: str) -> list[str]:
    if path.endswith(".odt"):
        import xml.etree.ElementTree as ElementTree

        with zipfile.ZipFile(path) as archive:
            root = ElementTree.fromstring(archive.read("content.xml"))
        tag = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}p"
        return ["".join(node.itertext()) for node in root.iter(tag)]
    return [paragraph.text for paragraph in _docx(path).paragraphs]


def compare_docx_files(first: str | None, second: str | None, **options: Any) -> float:
    """The documents' paragraph texts: equal (blanks squeezed, ``ignore_blanks`` by default; ``ignore_case``,
    ``ignore_order``), or with ``content_only`` their similarity."""
    if not first or not second or Path(first).suffix != Path(second).suffix:
        return 0.0
    texts = [_paragraph_texts(first), _paragraph_texts(second)]
    if options.get("ignore_order"):
        texts = [sorted(t) for t in texts]
    if options.get("ignore_case"):
        texts = [[p.lower() for p in t] for t in texts]
    if options.get("content_only"):
        one, two = (re.sub(r"\s+", " ", "\n".join(t)).strip() for t in texts)
        return ratio(one, two)
    if options.get("ignore_blanks", True):
        one, two = (re.sub(r"\s+", " ", "\n".join(t)).strip() for t in texts)
        return float(one == two)
    return float(texts[0] == texts[1])


def compare_docx_files_and_ignore_new_lines(first: str | None, second: str | None, **options: Any) -> float:
    """compare_docx_files with the empty paragraphs left out (.docx only)."""
    if not first or not second or not (first.endswith(".docx") and second.endswith(".docx")):
        return 0.0
    texts = [[p for p in _paragraph_texts(path) if p != ""] for path in (first, second)]
    if options.get("ignore_blanks", True):
        one, two = (re.sub(r"\s+", " ", "\n".join(t)).strip() for t in texts)
        return float(one == two)
    return float(texts[0] == texts[1])


def compare_docx_tables(first: str | None, second: str | None) -> float:
    if not first or not second:
        return 0.0
    tables = [_docx(first).tables, _docx(second).tables]
    if len(tables[0]) != len(tables[1]):
        return 0.0
    for one, two in zip(*tables):
        if len(one.rows) != len(two.rows) or len(one.columns) != len(two.columns):
            return 0.0
        for i in range(len(one.rows)):
            for j in range(len(one.columns)):
                if one.cell(i, j).text.strip() != two.cell(i, j).text.strip():
                    return 0.0
    return 1.0


def compare_line_spacing(first: str | None, second: str | None) -> float:
    if not first or not second or not compare_docx_files(first, second):
        return 0.0
    one, two = _docx(first).paragraphs, _docx(second).paragraphs
    return float(len(one) == len(two) and all(a.paragraph_format.line_spacing == b.paragraph_format.line_spacing
                                              for a, b in zip(one, two)))


def compare_subscript_contains(first: str | None, second: str | None) -> float:
    if not first or not second:
        return 0.0
    for one, two in zip(_docx(first).paragraphs, _docx(second).paragraphs):
        for a, b in zip(one.runs, two.runs):
            if a.font.subscript and b.font.subscript:
                return 1.0
    return 0.0


def has_page_numbers_in_footers(path: str | None, expected: Any = None) -> float:
    if not path:
        return 0.0
    for section in _docx(path).sections:
        text = section.footer.paragraphs[0].text if section.footer.paragraphs else ""
        if not any(char.isdigit() for char in text):
            return 0.0
    return 1.0


def compare_font_names(path: str | None, rules: dict) -> float:
    if not path:
        return 0.0
    return float(all(run.font.name == rules["font_name"] for p in _docx(path).paragraphs for run in p.runs))


def is_first_line_centered(path: str | None, expected: Any = None) -> float:
    from docx.enum.text import WD_PARAGRAPH_ALIGNMENT

    if not path:
        return 0.0
    paragraphs = _docx(path).paragraphs
    return float(bool(paragraphs) and paragraphs[0].paragraph_format.alignment == WD_PARAGRAPH_ALIGNMENT.CENTER)


def check_tabstops(first: str | None, second: str | None, **options: Any) -> float:
    """The paragraphs' tab stops (alignment and position) against the expected document's: 1 minus their mean
    distance over the text width; ``word_number_split_by_tabstop`` / ``index``: each paragraph's part before the
    ``index``-th tab holds that many words."""
    from docx.enum.text import WD_TAB_ALIGNMENT

    if not first or not second:
        return 0.0
    one = [p for p in _docx(first).paragraphs if p.text.strip()]
    document = _docx(second)
    two = [p for p in document.paragraphs if p.text.strip()]
    if len(one) != len(two) or not one:
        return 0.0
    if options.get("word_number_split_by_tabstop") is not None:
        for paragraph in one:
            part = paragraph.text.split("\t")[options.get("index", 0)]
            if len([word for word in re.split(r"\s", part) if word.strip()]) != options["word_number_split_by_tabstop"]:
                return 0.0
    section = document.sections[0]
    width = section.page_width - section.left_margin - section.right_margin

    def stops(paragraph: Any) -> list:
        return [t for t in paragraph.paragraph_format.tab_stops
                if not (t.alignment == WD_TAB_ALIGNMENT.CLEAR or (t.alignment == WD_TAB_ALIGNMENT.LEFT and t.position == 0))]

    minus = 0.0
    for a, b in zip(one, two):
        tabs_a, tabs_b = stops(a), stops(b)
        if len(tabs_a) != len(tabs_b) or any(x.alignment != y.alignment for x, y in zip(tabs_a, tabs_b)):
            return 0.0
        minus += sum(abs(x.position - y.position) for x, y in zip(tabs_a, tabs_b)) / width
    return 1 - minus / len(one)


def _pdf_text(path: str) -> str:
    from pypdf import PdfReader

    return "".join(page.extract_text() or "" for page in PdfReader(path).pages).strip()


def compare_pdfs(first: Any, second: Any) -> float:
    """The PDFs' texts' mean similarity, pair by pair (a file that is missing or unreadable counts 0)."""
    if not isinstance(second, list):
        first, second = [first], [second]
    if not isinstance(first, list) or not second:
        return 0.0
    total = 0.0
    for one, two in zip(first, second):
        try:
            total += ratio(_pdf_text(one), _pdf_text(two))
        except Exception:  # noqa: BLE001 - pypdf raises many kinds on a broken file; that pair counts 0
            continue
    return total / len(second)


def compare_archive(pred: str | None, gold: str | None, **options: Any) -> float:
    """Both archives hold the same file names (under ``file_path``), and their files compare (``file_type``:
    text, pdf, docx, image) on average."""
    if not pred or not gold:
        return 0.0
    compare = {"text": compare_text_file, "pdf": compare_pdfs, "docx": compare_docx_files,
               "image": compare_images}[options.get("file_type", "text")]
    inner = options.get("file_path", "")
    with tempfile.TemporaryDirectory() as scratch:
        folders = [Path(scratch) / "pred", Path(scratch) / "gold"]
        for archive, folder in zip((pred, gold), folders):
            shutil.unpack_archive(archive, folder)
        names = [sorted(p.name for p in (folder / inner).iterdir()) for folder in folders]
        if names[0] != names[1] or not names[0]:
            return 0.0
        return sum(compare(str(folders[0] / inner / n), str(folders[1] / inner / n)) for n in names[0]) / len(names[0])
