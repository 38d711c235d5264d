"""OSWorld's metrics (agent/envs/desktop/osworld_metrics.py), each on files the test makes: the state a task wants
scores 1, another state 0, and a file the agent left unreadable 0 (never an error)."""

from __future__ import annotations

import json
import shutil
import zipfile
from datetime import datetime

import pytest

from agent.envs.desktop import osworld_metrics as m
from agent.envs.desktop.osworld_getters import accessibility_xml
from agent.envs.desktop.osworld_time import relative_rules


def score(name, result, expected, **options):
    return m.METRICS[name].score(result, expected, options)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_check_list_wants_every_expected_line_and_no_unexpected_one(tmp_path):
    listing = write(tmp_path, "ls.txt", "inbox.eml\nA Test E-mail.eml\nCOMPANY.msf\n")
    assert score("check_list", listing, {"expect": [r"A Test E-mail.*\.eml", r"\bCOMPANY\.msf\b"]}) == 1
    assert score("check_list", listing, {"expect": [r"missing\.eml"]}) == 0
    assert score("check_list", listing, {"unexpect": [r"inbox"]}) == 0
    assert score("check_list", None, {"expect": []}) == 0


def test_check_direct_json_object_compares_keys_or_containment():
    rules = {"expected": {"locationName": "Zürich", "sortBy": "PRICE"}}
    assert score("check_direct_json_object", {"locationName": "Zürich", "sortBy": "PRICE", "x": 1}, rules) == 1
    assert score("check_direct_json_object", "{'locationName': 'Zürich', 'sortBy': 'PRICE'}", rules) == 1
    assert score("check_direct_json_object", {"locationName": "Bern", "sortBy": "PRICE"}, rules) == 0
    inside = {"expected": {"title": "Dota", "tags": ["a", "b"]}, "expect_in_result": True}
    assert score("check_direct_json_object", {"title": "The Dota 2 OST", "tags": ["b"]}, inside) == 1
    assert score("check_direct_json_object", {"title": "Other", "tags": ["b"]}, inside) == 0
    assert score("check_direct_json_object", "not json", rules) == 0


def test_check_accessibility_tree_selects_by_css_and_checks_text():
    walk = {"nodes": [
        {"id": 0, "parent": -1, "role": "application", "name": "Thunderbird", "text": ""},
        {"id": 1, "parent": 0, "role": "page tab list", "name": "tabs", "text": ""},
        {"id": 2, "parent": 1, "role": "page tab", "name": "About Profiles", "text": "About Profiles"}]}
    tree = accessibility_xml(walk)
    found = [{"selectors": ['application[name=Thunderbird] page-tab-list > page-tab[name="About Profiles"]']}]
    assert score("check_accessibility_tree", tree, found) == 1
    assert score("check_accessibility_tree", tree, [{**found[0], "text": "About Profiles", "exact": True}]) == 1
    assert score("check_accessibility_tree", tree, [{"selectors": ['page-tab[name="Settings"]']}]) == 0
    assert score("check_accessibility_tree", None, found) == 0


def test_the_os_metrics_read_command_outputs_and_listings():
    assert score("check_gnome_favorite_apps", "['thunderbird.desktop', 'vim.desktop']\n",
                 {"expected": ["vim.desktop", "thunderbird.desktop"]}) == 1
    assert score("check_gnome_favorite_apps", "['vim.desktop']", {"expected": ["vim.desktop", "x.desktop"]}) == 0
    utc = "Local time: Thu\nUniversal time: Thu\nRTC time: Thu\n  Time zone: Etc/UTC (UTC, +0000)\n"
    assert score("is_utc_0", utc, None) == 1 and score("is_utc_0", utc.replace("+0000", "+0100"), None) == 0
    assert score("is_utc_0", "", None) == 0
    assert score("check_text_enlarged", "1.25\n", None) == 1 and score("check_text_enlarged", "1.0", None) == 0
    assert score("check_text_enlarged", "", None) == 0  # gsettings said nothing: 0, not an error
    tree = {"type": "directory", "name": "cpjpg", "children": [{"type": "file", "name": "a.jpg"},
                                                               {"type": "file", "name": "b.jpg"}]}
    assert score("check_moved_jpgs", tree, {"expected": ["b.jpg", "a.jpg"]}) == 1
    assert score("check_moved_jpgs", tree, {"expected": ["a.jpg"]}) == 0 and score("check_moved_jpgs", None, {}) == 0


def test_thunderbird_prefs_and_filters(tmp_path):
    prefs = write(tmp_path, "prefs.js", 'user_pref("mail.identity.id1.auto_quote", false);\n'
                                        'user_pref("mail.spam.level", 3);\n')
    assert score("check_thunderbird_prefs", prefs, {"expect": {"mail.identity.id1.auto_quote":
                                                               {"method": "eq", "ref": False}}}) == 1
    assert score("check_thunderbird_prefs", prefs, {"expect": {"mail.spam.level": {"method": "gt", "ref": 5}}}) == 0
    assert score("check_thunderbird_prefs", prefs, {"unexpect": {"mail.spam.level": {"method": "eq", "ref": 3}}}) == 0
    assert score("check_thunderbird_prefs", prefs, {"expect": {"not.set": {"method": "eq", "ref": 1}}}) == 0
    rules = write(tmp_path, "msgFilterRules.dat", 'version="9"\nlogging="no"\nname="Forward all"\nenabled="yes"\n'
                                                  'type="17"\naction="Forward"\nactionValue="anonym-x2024@gmail.com"\n'
                                                  'condition="ALL"\n')
    wanted = {"enabled": "yes", "action": "Forward", "actionValue": "anonym-x2024@gmail.com", "condition": ["ALL"]}
    assert score("check_thunderbird_filter", rules, {"expect": [wanted]}) == 1
    assert score("check_thunderbird_filter", rules, {"expect": [{**wanted, "action": "Delete"}]}) == 0
    assert score("check_thunderbird_filter", rules, {"unexpect": [{"action": "Forward"}]}) == 0


def test_vlc_settings_and_playing_status(tmp_path):
    default = write(tmp_path, "vlcrc", "[qt]\n#qt-bgcone=1\n[core]\n#global-key-play-pause=\n")
    assert score("check_qt_bgcone", default, {"expected_qt_bgcone": 0}) == 0  # the default, commented: 1
    changed = write(tmp_path, "vlcrc2", "[qt]\nqt-bgcone=0\n[core]\nglobal-key-play-pause=Space\n")
    assert score("check_qt_bgcone", changed, {"expected_qt_bgcone": 0}) == 1
    assert score("check_global_key_play_pause", changed, {"expected_global_key_play_pause": 1}) == 1
    assert score("check_global_key_play_pause", default, {"expected_global_key_play_pause": 1}) == 0
    status = write(tmp_path, "status.xml", '<root><state>playing</state><information><category name="meta">'
                                           '<info name="filename">Never Gonna Give You Up.mp4</info>'
                                           '</category></information></root>')
    rule = {"type": "file_name", "file_name": "Never Gonna Give You Up.mp4"}
    assert score("is_vlc_playing", status, rule) == 1
    assert score("is_vlc_playing", write(tmp_path, "s2.xml", "<root><state>stopped</state></root>"), rule) == 0
    assert score("is_vlc_playing", None, rule) == 0


def test_vs_code_settings_text_and_extensions(tmp_path):
    settings = write(tmp_path, "settings.json", json.dumps({"editor.wordWrapColumn": 50, "a": 1}))
    assert score("check_json_settings", settings, {"expected": {"editor.wordWrapColumn": 50}}) == 1
    assert score("check_json_settings", settings, {"expected": {"editor.wordWrapColumn": 80}}) == 0
    assert score("check_json_settings", write(tmp_path, "bad.json", "{"), {"expected": {}}) == 0
    one, two = write(tmp_path, "one.txt", "Hello  world\n"), write(tmp_path, "two.txt", "hello world")
    assert score("compare_text_file", one, two) == 0
    assert score("compare_text_file", one, two, ignore_blanks=True, ignore_case=True) == 1
    assert score("compare_config", write(tmp_path, "p.txt", "project"), {"expected": "project"}) == 1
    assert score("compare_config", None, {"expected": "project"}) == 0
    listed = "njpwerner.autodocstring\nms-python.python\n"
    assert score("is_extension_installed", listed, {"type": "contain", "expected": "njpwerner.autodocstring"}) == 1
    assert score("is_extension_installed", "", {"type": "contain", "expected": "njpwerner.autodocstring"}) == 0
    assert score("is_extension_installed", listed, {"type": "not_contain", "expected": "ms-python.python"}) == 0


def test_chrome_tabs_and_pages():
    rule = {"type": "url", "url": "https://www.drugs.com/npc/"}
    assert score("is_expected_active_tab", "https://drugs.com/npc/", rule) == 1  # "www." aside, as OSWorld's
    assert score("is_expected_active_tab", {"url": "https://www.drugs.com/other"}, rule) == 0
    assert score("is_expected_active_tab", None, rule) == 0
    tabs = [{"url": "https://www.airbnb.com/"}, {"url": "https://lonelyplanet.com"}]
    assert score("is_expected_tabs", tabs, {"type": "url", "urls": ["https://www.lonelyplanet.com",
                                                                      "https://www.airbnb.com"]}) == 1
    assert score("is_expected_tabs", tabs[:1], {"type": "url", "urls": ["https://www.lonelyplanet.com"]}) == 0
    page = {"title": "Cart", "url": "https://store.steampowered.com/cart/", "content": "<li>The Dota 2 OST</li>"}
    assert score("is_added_to_steam_cart", page, {"items": ["The Dota 2 OST"]}) == 1
    assert score("is_added_to_steam_cart", page, {"items": ["Portal"]}) == 0


def _docx(path, paragraphs, *, centered=False, subscript=False, font=None, spacing=None, tabs=(), footer="",
          table=None):
    from docx import Document
    from docx.enum.text import WD_PARAGRAPH_ALIGNMENT

    document = Document()
    for index, text in enumerate(paragraphs):
        paragraph = document.add_paragraph()
        run = paragraph.add_run(text)
        if font:
            run.font.name = font
        if subscript and index == 0:
            paragraph.add_run("2").font.subscript = True
        if spacing:
            paragraph.paragraph_format.line_spacing = spacing
        for position in tabs:
            paragraph.paragraph_format.tab_stops.add_tab_stop(position)
        if centered and index == 0:
            paragraph.alignment = WD_PARAGRAPH_ALIGNMENT.CENTER
    if footer:
        document.sections[0].footer.paragraphs[0].text = footer
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for i, row in enumerate(table):
            for j, value in enumerate(row):
                grid.cell(i, j).text = value
    document.save(path)
    return str(path)


def test_the_writer_metrics_on_documents(tmp_path):
    from docx.shared import Inches

    plain = _docx(tmp_path / "plain.docx", ["Title", "Body text here"])
    same = _docx(tmp_path / "same.docx", ["Title", "Body  text here"])
    other = _docx(tmp_path / "other.docx", ["Title", "Something else"])
    assert score("compare_docx_files", plain, same) == 1 and score("compare_docx_files", plain, other) == 0
    assert 0 < score("compare_docx_files", plain, other, content_only=True) < 1
    assert score("compare_docx_files", plain, str(tmp_path / "missing.docx")) == 0
    centered = _docx(tmp_path / "c.docx", ["Title", "Body"], centered=True)
    assert score("is_first_line_centered", centered, None) == 1 and score("is_first_line_centered", plain, None) == 0
    water = _docx(tmp_path / "h2o.docx", ["H", "O"], subscript=True)
    assert score("compare_subscript_contains", water, water) == 1 and score("compare_subscript_contains", plain, water) == 0
    numbered = _docx(tmp_path / "n.docx", ["a"], footer="Page 1")
    assert score("has_page_numbers_in_footers", numbered, None) == 1
    assert score("has_page_numbers_in_footers", plain, None) == 0
    times = _docx(tmp_path / "t.docx", ["a", "b"], font="Times New Roman")
    assert score("compare_font_names", times, {"font_name": "Times New Roman"}) == 1
    assert score("compare_font_names", plain, {"font_name": "Times New Roman"}) == 0
    double = _docx(tmp_path / "d.docx", ["Title", "Body text here"], spacing=2.0)
    assert score("compare_line_spacing", double, double) == 1 and score("compare_line_spacing", plain, double) == 0
    tabbed = _docx(tmp_path / "tab.docx", ["one two three\tx"], tabs=[Inches(3)])
    assert score("check_tabstops", tabbed, tabbed, word_number_split_by_tabstop=3, index=0) == 1
    assert score("check_tabstops", _docx(tmp_path / "tab0.docx", ["one two three\tx"]), tabbed) == 0
    grid = _docx(tmp_path / "g.docx", ["x"], table=[["a", "b"], ["c", "d"]])
    assert score("compare_docx_tables", grid, grid) == 1
    assert score("compare_docx_tables", grid, _docx(tmp_path / "g2.docx", ["x"], table=[["a", "b"], ["c", "e"]])) == 0


def _pdf(path, text):
    """A one-page PDF showing ``text`` (written by hand: Helvetica, one text object)."""
    stream = f"BT /F1 18 Tf 50 700 Td ({text}) Tj ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(out)
    return str(path)


def test_pdfs_and_archives_compare_their_contents(tmp_path):
    alex = _pdf(tmp_path / "alex.pdf", "Alex Lee scored well")
    assert score("compare_pdfs", alex, _pdf(tmp_path / "alex2.pdf", "Alex Lee scored well")) == 1
    assert score("compare_pdfs", [alex], [_pdf(tmp_path / "x.pdf", "Zzz qqq")]) < 0.5
    assert score("compare_pdfs", [None], [alex]) == 0
    for name, files in (("pred", {"s/a.txt": "one", "s/b.txt": "two"}), ("gold", {"s/a.txt": "one", "s/b.txt": "two"}),
                        ("wrong", {"s/a.txt": "one"})):
        with zipfile.ZipFile(tmp_path / f"{name}.zip", "w") as archive:
            for inner, text in files.items():
                archive.writestr(inner, text)
    pred, gold, wrong = (str(tmp_path / f"{n}.zip") for n in ("pred", "gold", "wrong"))
    assert score("compare_archive", pred, gold, file_path="s", file_type="text") == 1
    assert score("compare_archive", wrong, gold, file_path="s", file_type="text") == 0
    assert score("compare_archive", write(tmp_path, "notzip.zip", "x"), gold, file_path="s") == 0


def _picture(path, *, mode="RGB", saturation=1.0, text=""):
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (160, 120), (200, 180, 160))
    draw = ImageDraw.Draw(image)
    draw.rectangle((20, 20, 80, 90), fill=(180, 40, 40))
    draw.ellipse((90, 30, 150, 100), fill=(40, 90, 180))
    if text:
        image = Image.new("RGB", (420, 90), "white")
        ImageDraw.Draw(image).text((10, 10), text, fill="black", font=ImageFont.load_default(size=48))
    if saturation != 1.0:  # more saturated, same hue and brightness (HSV's S scaled), as GIMP's saturation tool
        h, sat, v = image.convert("HSV").split()
        image = Image.merge("HSV", (h, sat.point(lambda x: min(255, int(x * saturation))), v)).convert("RGB")
    if mode == "P":
        image = image.convert("P", palette=Image.Palette.ADAPTIVE)
    image.save(path)
    return str(path)


def test_image_metrics_by_structural_similarity(tmp_path):
    import numpy as np

    original = _picture(tmp_path / "o.png")
    assert m.ssim(np.full((20, 20), 9), np.full((20, 20), 9)) == pytest.approx(1.0)
    assert score("compare_images", original, original) == pytest.approx(1.0)
    noise = tmp_path / "noise.png"
    from PIL import Image

    Image.fromarray(np.random.default_rng(0).integers(0, 255, (120, 160, 3), dtype=np.uint8)).save(noise)
    assert score("compare_images", original, str(noise)) < 0.3
    assert score("check_structure_sim", original, original) == 1 and score("check_structure_sim", str(noise), original) == 0
    palette = _picture(tmp_path / "p.png", mode="P")
    assert score("check_palette_and_structure_sim", palette, original) == 1
    assert score("check_palette_and_structure_sim", original, original) == 0  # not indexed
    vivid = _picture(tmp_path / "v.png", saturation=1.8)
    assert score("check_saturation_increase_and_structure_sim", vivid, original) == 1
    assert score("check_saturation_increase_and_structure_sim", original, vivid) == 0
    assert score("compare_images", write(tmp_path, "not.png", "x"), original) == 0


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract-ocr is not installed (make env-tools)")
def test_compare_image_text_reads_the_words_in_a_picture(tmp_path):
    shot = _picture(tmp_path / "ls.png", text="$ ls Documents")
    assert score("compare_image_text", shot, {"type": "text", "text": "ls"}) == 1
    assert score("compare_image_text", shot, {"type": "text", "text": "mkdir"}) == 0


def test_compare_table_compares_charts(tmp_path):
    from openpyxl import Workbook
    from openpyxl.chart import BarChart, LineChart, Reference

    def book(name, chart_type, title):
        workbook = Workbook()
        sheet = workbook.active
        for row in (("Jan", 10), ("Feb", 20), ("Mar", 30)):
            sheet.append(row)
        chart = chart_type()
        chart.title = title
        chart.add_data(Reference(sheet, min_col=2, min_row=1, max_row=3))
        chart.set_categories(Reference(sheet, min_col=1, min_row=1, max_row=3))
        sheet.add_chart(chart, "D2")
        workbook.save(tmp_path / name)
        return str(tmp_path / name)

    bars, line = book("bars.xlsx", BarChart, "Sales"), book("line.xlsx", LineChart, "Sales")
    rule = [{"type": "chart", "sheet_idx0": 0, "sheet_idx1": "EI0", "chart_props": ["type", "title"]}]
    assert score("compare_table", bars, book("bars2.xlsx", BarChart, "Sales"), rules=rule) == 1
    assert score("compare_table", bars, line, rules=rule) == 0
    assert score("compare_table", bars, book("t.xlsx", BarChart, "Costs"), rules=rule) == 0


def test_rule_relative_time_writes_out_the_days_it_names():
    monday = datetime(2026, 12, 2)  # a Wednesday: next Monday is the 7th, the Friday after it the 11th
    rules = {"relativeTime": {"from": "next Monday", "to": "next Friday"},
             "expected": {"from": "{DoW}, {DayD} {Month} {Year}, 10:00", "to": "{DoW}, {DayD} {Month} {Year}, 10:00"}}
    out = relative_rules(rules, monday)
    assert out["expected"] == {"from": "Monday, 7 December 2026, 10:00", "to": "Friday, 11 December 2026, 10:00"}
    assert rules["expected"]["from"].startswith("{DoW}")  # the task's own rule is left as it was
    assert relative_rules({"relativeTime": {"from": "tomorrow"}, "expected": {"time": "{DayD}"}},
                          monday)["expected"]["time"] == "3"
    with pytest.raises(ValueError, match="unknown relative time 'someday'"):
        relative_rules({"relativeTime": {"from": "someday"}, "expected": {"time": ""}}, monday)


def test_csv_lists_keybindings_urls_and_plain_text_lines(tmp_path):
    rows = write(tmp_path, "rows.csv", "name,age\nAnn,31\nBob,40\n")
    assert score("check_csv", rows, {"expect": [{"name": "Bob", "age": "40"}]}) == 1
    assert score("check_csv", rows, {"expect": [{"name": "Eve"}]}) == 0
    assert score("check_csv", rows, {"unexpect": [{"name": "Ann"}]}) == 0
    same = write(tmp_path, "same.csv", "NAME,age \nann,31\nbob,40")
    assert score("compare_csv", rows, same) == 0 and score("compare_csv", rows, same, strict=False, ignore_case=True) == 1
    assert score("diff_text_file", rows, rows) == 1 and score("diff_text_file", rows, same) == 0
    assert score("diff_text_file", rows, write(tmp_path, "one.csv", "name,age\nAnn,31\nCid,50\n")) == pytest.approx(2 / 3)
    assert score("is_in_list", ["a.desktop", "b.desktop"], {"expected": "b.desktop"}) == 1
    assert score("is_in_list", None, {"expected": "b.desktop"}) == 0
    binding = {"key": "ctrl+j", "command": "editor.action.joinLines"}
    keys = write(tmp_path, "keybindings.json", "// Place your key bindings in this file\n" + json.dumps([binding]))
    assert score("check_json_keybindings", keys, {"expected": binding}) == 1
    assert score("check_json_keybindings", keys, {"expected": {**binding, "key": "ctrl+k"}}) == 0
    url = "https://www.google.com/search?q=loupe+osworld&tbm=isch"
    assert score("is_expected_url_pattern_match", {"url": url}, {"expected": [r"q=loupe", r"tbm=isch"]}) == 1
    assert score("is_expected_url_pattern_match", url, {"expected": [r"tbm=vid"]}) == 0
    assert score("is_expected_url_pattern_match", None, {"expected": []}) == 0


def test_docx_without_empty_paragraphs_darker_images_and_frozen_panes(tmp_path):
    from openpyxl import Workbook
    from PIL import Image, ImageEnhance

    spaced = _docx(tmp_path / "spaced.docx", ["Title", "", "Body"])
    tight = _docx(tmp_path / "tight.docx", ["Title", "Body"])
    assert score("compare_docx_files", spaced, tight, ignore_blanks=False) == 0
    assert score("compare_docx_files_and_ignore_new_lines", spaced, tight, ignore_blanks=False) == 1
    assert score("compare_docx_files_and_ignore_new_lines", spaced, _docx(tmp_path / "o.docx", ["Other"])) == 0
    original = _picture(tmp_path / "o.png")
    darker = tmp_path / "d.png"
    ImageEnhance.Brightness(Image.open(original)).enhance(0.6).save(darker)
    assert score("check_brightness_decrease_and_structure_sim", str(darker), original) == 1
    assert score("check_brightness_decrease_and_structure_sim", original, str(darker)) == 0

    def book(name, panes):
        workbook = Workbook()
        workbook.active.append(["a", "b"])
        workbook.active.freeze_panes = panes
        workbook.save(tmp_path / name)
        return str(tmp_path / name)

    rule = [{"type": "freeze", "sheet_idx0": 0, "sheet_idx1": "EI0"}]
    assert score("compare_table", book("f1.xlsx", "A2"), book("f2.xlsx", "A2"), rules=rule) == 1
    assert score("compare_table", book("f3.xlsx", None), book("f4.xlsx", "A2"), rules=rule) == 0
