"""OSWorld's metrics (``evaluator.func``): a score in 0..1 from what the getters read, with OSWorld's signatures
``metric(result, expected, **options)``.

One registry, ``METRICS``: each metric's function, the options it takes (None: any, as OSWorld passes them on) and
whether it needs a result and an expected getter. A file the agent left unreadable, or a value of another shape,
scores 0 (the check ran and the state is not what it wants), never an error of the episode. Written from what
OSWorld's metrics do (desktop_env/evaluators/metrics); text similarity is difflib's ratio where OSWorld uses
rapidfuzz's, and SSIM is computed here (a 7x7 window, as scikit-image's default).

The metrics themselves are in a module per topic: osworld_metrics_general (text, JSON, lists, CSV, the
accessibility tree, and the rule matching the others share), _apps (the OS, apps' settings, Chrome), _documents,
_images and _tables (spreadsheets).
"""

from __future__ import annotations

import re
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.envs.desktop.osworld_metrics_apps import (
    check_global_key_play_pause,
    check_gnome_favorite_apps,
    check_json_keybindings,
    check_json_settings,
    check_moved_jpgs,
    check_qt_bgcone,
    check_text_enlarged,
    check_thunderbird_filter,
    check_thunderbird_prefs,
    compare_config,
    compare_text_file,
    is_added_to_steam_cart,
    is_expected_active_tab,
    is_expected_tabs,
    is_expected_url_pattern_match,
    is_extension_installed,
    is_utc_0,
    is_vlc_playing,
)
from agent.envs.desktop.osworld_metrics_documents import (
    check_tabstops,
    compare_archive,
    compare_docx_files,
    compare_docx_files_and_ignore_new_lines,
    compare_docx_tables,
    compare_font_names,
    compare_line_spacing,
    compare_pdfs,
    compare_subscript_contains,
    has_page_numbers_in_footers,
    is_first_line_centered,
)
from agent.envs.desktop.osworld_metrics_general import (
    check_accessibility_tree,
    check_csv,
    check_direct_json_object,
    check_include_exclude,
    check_json,
    check_list,
    compare_csv,
    diff_text_file,
    exact_match,
    fuzzy_match,
    is_in_list,
)
from agent.envs.desktop.osworld_metrics_images import (
    check_brightness_decrease_and_structure_sim,
    check_palette_and_structure_sim,
    check_saturation_increase_and_structure_sim,
    check_structure_sim,
    compare_image_text,
    compare_images,
    ssim,
)
from agent.envs.desktop.osworld_metrics_tables import TABLE_RULES, check_table_rules, compare_table

__all__ = ["METRICS", "TABLE_RULES", "MetricKind", "compare_table", "ssim"]


@dataclass(frozen=True)
class MetricKind:
    func: Callable[..., float]
    options: tuple[str, ...] | None = ()  # None: any option, passed on
    needs_result: bool = True
    needs_expected: bool = True
    check: Callable[[dict, Any, str, Any], None] | None = None

    def score(self, result: Any, expected: Any, options: dict) -> float:
        try:
            return float(self.func(result, expected, **options))
        except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, zipfile.BadZipFile,
                SyntaxError, re.error, shutil.ReadError):
            return 0.0  # what the agent left (or did not) is not what the check reads


def _infeasible(result: Any, expected: Any) -> float:  # scored by evaluate_task from the agent's answer
    return 0.0


METRICS: dict[str, MetricKind] = {
    "infeasible": MetricKind(_infeasible, needs_result=False, needs_expected=False),
    "exact_match": MetricKind(exact_match),
    "check_include_exclude": MetricKind(check_include_exclude),
    "fuzzy_match": MetricKind(fuzzy_match),
    "check_json": MetricKind(check_json, ("is_yaml",)),
    "check_list": MetricKind(check_list),
    "is_in_list": MetricKind(is_in_list),
    "diff_text_file": MetricKind(diff_text_file),
    "check_csv": MetricKind(check_csv),
    "compare_csv": MetricKind(compare_csv, ("strict", "ignore_case")),
    "check_json_keybindings": MetricKind(check_json_keybindings, None),
    "is_expected_url_pattern_match": MetricKind(is_expected_url_pattern_match),
    "compare_docx_files_and_ignore_new_lines": MetricKind(compare_docx_files_and_ignore_new_lines, ("ignore_blanks",)),
    "check_brightness_decrease_and_structure_sim": MetricKind(check_brightness_decrease_and_structure_sim),
    "check_direct_json_object": MetricKind(check_direct_json_object),
    "check_accessibility_tree": MetricKind(check_accessibility_tree),
    "compare_table": MetricKind(compare_table, ("rules",), needs_expected=False, check=check_table_rules),
    "check_gnome_favorite_apps": MetricKind(check_gnome_favorite_apps),
    "is_utc_0": MetricKind(is_utc_0, needs_expected=False),
    "check_text_enlarged": MetricKind(check_text_enlarged, needs_expected=False),
    "check_moved_jpgs": MetricKind(check_moved_jpgs),
    "check_thunderbird_prefs": MetricKind(check_thunderbird_prefs),
    "check_thunderbird_filter": MetricKind(check_thunderbird_filter),
    "check_qt_bgcone": MetricKind(check_qt_bgcone),
    "check_global_key_play_pause": MetricKind(check_global_key_play_pause),
    "is_vlc_playing": MetricKind(is_vlc_playing),
    "check_json_settings": MetricKind(check_json_settings, None),
    "compare_text_file": MetricKind(compare_text_file, ("ignore_blanks", "ignore_case")),
    "compare_config": MetricKind(compare_config, None),
    "is_extension_installed": MetricKind(is_extension_installed, None),
    "is_expected_active_tab": MetricKind(is_expected_active_tab),
    "is_expected_tabs": MetricKind(is_expected_tabs),
    "is_added_to_steam_cart": MetricKind(is_added_to_steam_cart),
    "compare_docx_files": MetricKind(compare_docx_files, ("ignore_blanks", "ignore_case", "ignore_order",
                                                          "content_only")),
    "compare_docx_tables": MetricKind(compare_docx_tables),
    "compare_line_spacing": MetricKind(compare_line_spacing),
    "compare_subscript_contains": MetricKind(compare_subscript_contains),
    "has_page_numbers_in_footers": MetricKind(has_page_numbers_in_footers, needs_expected=False),
    "compare_font_names": MetricKind(compare_font_names),
    "is_first_line_centered": MetricKind(is_first_line_centered, needs_expected=False),
    "check_tabstops": MetricKind(check_tabstops, ("word_number_split_by_tabstop", "index")),
    "compare_pdfs": MetricKind(compare_pdfs),
    "compare_archive": MetricKind(compare_archive, ("file_path", "file_type")),
    "compare_images": MetricKind(compare_images),
    "check_structure_sim": MetricKind(check_structure_sim),
    "check_palette_and_structure_sim": MetricKind(check_palette_and_structure_sim),
    "check_saturation_increase_and_structure_sim": MetricKind(check_saturation_increase_and_structure_sim),
    "compare_image_text": MetricKind(compare_image_text),
}
