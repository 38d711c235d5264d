"""OSWorld's metrics of images: SSIM (computed here, a 7x7 window as scikit-image's default), brightness,
saturation and text in an image. Registered in osworld_metrics.METRICS."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any


# -- images --------------------------------------------------------------------------------------
def _box_mean(array: Any, size: int) -> Any:
    """Means of every ``size`` x ``size`` window (valid windows only), by summed-area tables."""
    import numpy as np

    table = np.pad(array, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    total = table[size:, size:] - table[:-size, size:] - table[size:, :-size] + table[:-size, :-size]
    return total / (size * size)


def ssim(first: Any, second: Any, *, size: int = 7, data_range: float = 255.0) -> float:
    """Mean structural similarity of two same-sized images (arrays, H x W or H x W x C; channels averaged), with a
    uniform 7x7 window and the usual constants (K1 0.01, K2 0.03), as scikit-image's default."""
    import numpy as np

    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if a.shape != b.shape:
        return 0.0
    if a.ndim == 3:
        return float(np.mean([ssim(a[..., c], b[..., c], size=size, data_range=data_range)
                              for c in range(a.shape[2])]))
    if min(a.shape) < size:
        return float(np.array_equal(a, b))
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    n = size * size
    mu_a, mu_b = _box_mean(a, size), _box_mean(b, size)
    var_a = (_box_mean(a * a, size) - mu_a ** 2) * n / (n - 1)
    var_b = (_box_mean(b * b, size) - mu_b ** 2) * n / (n - 1)
    cov = (_box_mean(a * b, size) - mu_a * mu_b) * n / (n - 1)
    value = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return float(value.mean())


def _image(path: str, mode: str | None = None) -> Any:
    from PIL import Image

    image = Image.open(path)
    image.load()
    return image.convert(mode) if mode else image


def _same_structure(first: Any, second: Any, threshold: float = 0.9) -> bool:
    import numpy as np

    return first.size == second.size and ssim(np.array(first), np.array(second)) >= threshold


def compare_images(first: str | None, second: str | None, **options: Any) -> float:
    """SSIM of the two images in grey, both resized to the smaller one's size."""
    if not first or not second:
        return 0.0
    from PIL import Image

    one, two = _image(first, "L"), _image(second, "L")
    size = min(one.size, two.size)
    return ssim(one.resize(size, Image.Resampling.LANCZOS), two.resize(size, Image.Resampling.LANCZOS))


def check_structure_sim(source: str | None, target: str | None) -> float:
    if source is None or target is None:
        return 0.0
    one, two = _image(source), _image(target)
    if one.mode != two.mode:
        two = two.convert(one.mode)
    return float(_same_structure(one, two))


def check_palette_and_structure_sim(source: str | None, target: str | None) -> float:
    """The result is a palette (indexed) image and looks like the original."""
    if source is None or target is None:
        return 0.0
    image = _image(source)
    return float(image.mode == "P" and _same_structure(image.convert("RGB"), _image(target, "RGB")))


def _saturation(hsv: Any) -> float:
    import numpy as np

    return float(np.array(hsv.split()[1]).mean())


def check_saturation_increase_and_structure_sim(source: str | None, target: str | None) -> float:
    """The result is more saturated than the original, and their hue and value channels keep its structure."""
    if source is None or target is None:
        return 0.0
    one, two = _image(source, "RGB").convert("HSV"), _image(target, "RGB").convert("HSV")
    h1, _, v1 = one.split()
    h2, _, v2 = two.split()
    return float(_saturation(one) > _saturation(two) and _same_structure(h1, h2) and _same_structure(v1, v2))


def _brightness(image: Any) -> float:
    import numpy as np

    return float(np.array(image.convert("L")).mean())


def check_brightness_decrease_and_structure_sim(source: str | None, target: str | None) -> float:
    """The result is darker than the original, and the same picture once both are brought to one brightness (their
    mean squared difference under 0.03, on 0..1 values)."""
    import numpy as np

    if source is None or target is None:
        return 0.0
    one, two = _image(source, "RGB"), _image(target, "RGB")
    if one.size != two.size or _brightness(one) >= _brightness(two):
        return 0.0

    def normal(image: Any) -> Any:
        factor = 128 / max(_brightness(image), 1e-6)
        return np.clip(np.array(image, dtype=np.float32) * factor, 0, 255).astype(np.uint8) / 255.0

    return float(np.mean((normal(one) - normal(two)) ** 2) < 0.03)


def compare_image_text(path: str | None, rule: dict) -> float:
    """The rule's text is among the words OCR reads in the image (tesseract; OSWorld uses easyocr)."""
    if not path or rule.get("type") != "text":
        return 0.0
    if shutil.which("tesseract") is None:
        raise OSError("tesseract is not installed")
    result = subprocess.run(["tesseract", path, "-", "--psm", "6"], capture_output=True, text=True, timeout=60)
    return float(rule["text"] in " ".join(result.stdout.split()))
